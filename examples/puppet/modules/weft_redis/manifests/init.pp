# weft_redis: Redis on the node's own address; the Puppet twin of the example
# catalog's shell `redis` service, kept in the same place (<node root>/redis).
# weft_action (Hiera data written by the puppet automator) says which action
# this run is (start, stop or remove); $port comes from the service's `data` field.
class weft_redis (
  Integer $port = 6379,
) {
  $node = lookup('weft_node')
  $bind = $node['bind_v4']
  $dir = "${node['root']}/redis"
  $pid = "${dir}/redis.pid"
  $running = "test -s ${pid} && kill -0 \"\$(cat ${pid})\""
  Exec { path => ['/usr/sbin', '/usr/bin', '/sbin', '/bin'], provider => shell }

  case lookup('weft_action') {
    # One run does it all (puppet apply takes seconds to start): the package,
    # the config, then redis running, restarted when it ran and its config changed.
    'start': {
      package { 'redis-server': ensure => installed }
      file { $dir: ensure => directory }
      file { "${dir}/redis.conf":
        content => epp('weft_redis/redis.conf.epp', { 'dir' => $dir, 'bind' => $bind, 'port' => $port }),
        require => Package['redis-server'],
        notify  => Exec['stop changed redis'],
      }
      exec { 'stop changed redis':
        command     => "kill \"\$(cat ${pid})\"; for i in \$(seq 100); do ${running} || break; sleep 0.1; done",
        onlyif      => $running,
        refreshonly => true,
      }
      # redis-server returns once it has daemonized, before it listens: wait until it answers.
      exec { 'start redis':
        command => "redis-server ${dir}/redis.conf </dev/null >${dir}/start.log 2>&1 || { cat ${dir}/start.log >&2; exit 1; }
                    for i in \$(seq 100); do redis-cli -h ${bind} -p ${port} ping >/dev/null 2>&1 && exit 0; sleep 0.1; done
                    echo 'redis does not answer after 10 s' >&2; exit 1",
        unless  => $running,
        require => Exec['stop changed redis'],
      }
    }
    'stop', 'remove': {
      exec { 'stop redis':
        command => "kill \"\$(cat ${pid})\"; for i in \$(seq 100); do ${running} || break; sleep 0.1; done; rm -f ${pid}",
        onlyif  => $running,
      }
      if lookup('weft_action') == 'remove' {
        file { $dir: ensure => absent, force => true, recurse => true, require => Exec['stop redis'] }
      }
    }
    default: {
      notice("weft_redis: nothing to do for ${lookup('weft_action')}")
    }
  }
}
