# weft_nginx: nginx on the node's own address, serving a page that names its
# node; the Puppet twin of the example catalog's shell `nginx` service, kept in
# the same place on the node (<node root>/nginx). The puppet automator passes
# the task as Hiera data: weft_action says which action this run is (start,
# stop or remove), weft_node where it runs; $port and $redis come from the
# service's `data` field.
class weft_nginx (
  Integer $port = 8080,
  String $redis = '',
) {
  $node = lookup('weft_node')
  $bind = $node['bind_v4']
  $dir = "${node['root']}/nginx"
  $pid = "${dir}/nginx.pid"
  $running = "test -s ${pid} && kill -0 \"\$(cat ${pid})\""
  $start = "nginx -p ${dir}/ -e ${dir}/log/error.log -c ${dir}/nginx.conf"
  Exec { path => ['/usr/sbin', '/usr/bin', '/sbin', '/bin'], provider => shell }

  case lookup('weft_action') {
    # One run does it all (puppet apply takes seconds to start): the package,
    # the files, then nginx running, reloaded when it ran and its config changed.
    'start': {
      package { 'nginx': ensure => installed }
      file { [$dir, "${dir}/html", "${dir}/log"]: ensure => directory }
      file { "${dir}/tmp": ensure => directory, owner => 'www-data' }
      file { "${dir}/nginx.conf":
        content      => epp('weft_nginx/nginx.conf.epp', { 'dir' => $dir, 'bind' => $bind, 'port' => $port }),
        validate_cmd => "nginx -t -q -p ${dir}/ -e ${dir}/log/error.log -c %",
        require      => [Package['nginx'], File["${dir}/tmp"], File["${dir}/log"]],
        notify       => Exec['reload nginx'],
      }
      file { "${dir}/html/index.html":
        content => epp('weft_nginx/index.html.epp', {
          'hostname' => $node['hostname'], 'bind' => $bind, 'port' => $port, 'redis' => $redis,
          'cluster'  => lookup('weft_cluster', Hash, 'first', {})['id'],
        }),
      }
      exec { 'reload nginx':
        command     => "kill -HUP \"\$(cat ${pid})\"",
        onlyif      => $running,
        refreshonly => true,
      }
      exec { 'start nginx':
        command => "${start} </dev/null >${dir}/log/start.log 2>&1 || { cat ${dir}/log/start.log >&2; exit 1; }",
        unless  => $running,
        require => [Exec['reload nginx'], File["${dir}/html/index.html"]],
      }
    }
    'stop', 'remove': {
      exec { 'stop nginx':
        command => "kill -QUIT \"\$(cat ${pid})\"; for i in \$(seq 100); do ${running} || break; sleep 0.1; done; rm -f ${pid}",
        onlyif  => $running,
      }
      if lookup('weft_action') == 'remove' {
        file { $dir: ensure => absent, force => true, recurse => true, require => Exec['stop nginx'] }
      }
    }
    default: {
      notice("weft_nginx: nothing to do for ${lookup('weft_action')}")
    }
  }
}
