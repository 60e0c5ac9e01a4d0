#!/usr/bin/env bash
# Installs the Debian packages Trireme's tests and tools need, if any is missing:
# MariaDB 10.11 (server, client, mariadb-backup), Galera 4 (the side-by-side reference),
# sysbench, and the tools MariaDB's SST scripts call (rsync, socat, iproute2 for `ss`, and
# stunnel4: wsrep_sst_rsync runs rsync through stunnel when [sst] tkey/tcert are set;
# wsrep_sst_mariabackup's TLS uses socat, whose Debian build has OpenSSL), and for the
# security tests: openssl (makes test certificates, checks the group port) and tcpdump
# (captures the hosts' bridge to show nothing crosses it in clear); chromium (opens the
# status page headless) and prometheus-mysqld-exporter (scrapes a node as DBAs do).
set -euo pipefail

# Whether socat is built with OpenSSL (read whole: `grep -q` would stop early and, under
# pipefail, turn socat's SIGPIPE into a failure).
socat_has_openssl() {
  case "$(socat -V 2>/dev/null || true)" in
    *"WITH_OPENSSL 1"*) return 0 ;;
    *) return 1 ;;
  esac
}

missing=0
socat_has_openssl || missing=1
for path in /usr/sbin/mariadbd /usr/bin/mariadb /usr/bin/mariadb-backup \
            /usr/lib/galera/libgalera_smm.so /usr/bin/sysbench /usr/bin/rsync \
            /usr/bin/socat /usr/bin/ss /usr/bin/stunnel /usr/bin/openssl /usr/bin/tcpdump \
            /usr/share/mysql/mysql-test/mariadb-test-run /usr/bin/lsof /usr/bin/garbd \
            /usr/bin/chromium /usr/bin/prometheus-mysqld-exporter /usr/bin/make; do
  [ -e "$path" ] || missing=1
done
[ "$missing" = 1 ] || exit 0

echo "==> installing Debian packages: mariadb-server mariadb-client mariadb-backup galera-4 galera-arbitrator-4 sysbench rsync socat iproute2 stunnel4 openssl tcpdump mariadb-test lsof chromium prometheus-mysqld-exporter make"
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
# The packaged service is not used: clusters run their own mariadbd processes.
$sudo_cmd apt-get install -y -qq --no-install-recommends \
  mariadb-server mariadb-client mariadb-backup galera-4 galera-arbitrator-4 sysbench rsync socat \
  iproute2 stunnel4 openssl tcpdump mariadb-test lsof chromium prometheus-mysqld-exporter make >/dev/null
# The SST scripts' TLS needs socat built with OpenSSL (Debian's is; a local build may not be).
if ! socat_has_openssl; then
  echo "install-deps: socat ($(command -v socat)) has no OpenSSL support: an SST by" \
       "mariabackup with TLS would fail" >&2
  exit 1
fi
