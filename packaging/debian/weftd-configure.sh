    # weftd and weft-web run as system users of their own (docs/install.md,
    # "Who runs as whom"): weft owns weftd's store, keys, resources and
    # credentials; weft-web, which faces browsers, reads only its TLS key and
    # gateway credential and none of weftd's files.
    if ! getent passwd weft >/dev/null; then
      adduser --quiet --system --group --home /var/lib/weft --no-create-home weft
    fi
    if ! getent passwd weft-web >/dev/null; then
      adduser --quiet --system --group --home /nonexistent --no-create-home weft-web
    fi
    # /var/lib/weft also holds root's directories (weft-host's plugins/, whose
    # files a root process loads, and the local provider's local-nodes/): it
    # stays root's, and group weft may add entries to it but, the sticky bit
    # set, neither rename nor delete root's. An operator's dpkg-statoverride wins.
    mkdir -p /var/lib/weft
    if ! dpkg-statoverride --list /var/lib/weft >/dev/null 2>&1; then
      chown root:weft /var/lib/weft
      chmod 1775 /var/lib/weft
    fi
    # weftd's own state, made by root when an earlier package ran weftd as root,
    # is given to weft once (what weft owns already is left as it is), with
    # weftd stopped so that nothing new is made by root meanwhile. In
    # server.data_dir of weftd.toml, /var/lib/weft unless the operator moved it.
    data_dir=$(sed -n 's/^[[:space:]]*data_dir[[:space:]]*=[[:space:]]*"\(\/[^"]*\)".*/\1/p' \
      /etc/weft/weftd.toml 2>/dev/null | head -n 1)
    data_dir=${data_dir:-/var/lib/weft}
    given=""
    for name in weft.db weft.db-wal weft.db-shm weft.db-journal weftd.lock endpoints.json ports.json \
                postgres-timeline.json keys resources credentials; do
      path=$data_dir/$name
      if [ -e "$path" ] && [ ! -L "$path" ] && [ "$(stat -c %u "$path")" = 0 ]; then
        given="$given $name"
      fi
    done
    if [ -n "$given" ]; then
      was_running=""
      if [ -d /run/systemd/system ]; then
        if systemctl --quiet is-active weftd.service; then
          was_running=yes
        fi
        deb-systemd-invoke stop weftd.service >/dev/null || true
      fi
      for name in $given; do
        chown -R weft:weft "$data_dir/$name"
      done
      # The restart below starts only an enabled or running unit: a weftd the
      # operator runs without enabling it would stay stopped.
      if [ -n "$was_running" ]; then
        systemctl start weftd.service >/dev/null || true
      fi
      message="weftd runs as the user weft from now on: gave it what an earlier weftd made as root in $data_dir:$given"
      echo "$message" >&2
      logger -t weftd-postinst "$message" 2>/dev/null || true
    fi
    # A data directory moved elsewhere is the operator's to give: say so when
    # weft cannot write there (docs/install.md).
    if [ -d "$data_dir" ] && ! setpriv --reuid=weft --regid=weft --init-groups test -w "$data_dir"; then
      message="weftd runs as the user weft from now on and cannot write its data directory $data_dir: chown weft:weft $data_dir"
      echo "$message" >&2
      logger -t weftd-postinst "$message" 2>/dev/null || true
    fi
    # weft-web ran as root before it had its user: the files its configuration
    # names (the TLS certificate and key, the gateway credential) and the
    # configuration itself, where weft-web cannot read them, are given to it
    # (their modes kept), so that the upgrade's restart does not stop it
    # (docs/install.md).
    if [ -f /etc/weft/weft-web.toml ]; then
      given=""
      for path in /etc/weft/weft-web.toml $(sed -n \
          's/^[[:space:]]*\(cert\|key\|credentials\)[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\2/p' \
          /etc/weft/weft-web.toml); do
        if [ -f "$path" ] && ! setpriv --reuid=weft-web --regid=weft-web --init-groups test -r "$path"; then
          chown weft-web "$path"
          given="$given $path"
        fi
      done
      if [ -n "$given" ]; then
        message="weft-web runs as the user weft-web from now on: gave it what it could not read:$given"
        echo "$message" >&2
        logger -t weftd-postinst "$message" 2>/dev/null || true
      fi
    fi
