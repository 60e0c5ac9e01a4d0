#!/usr/bin/env bash
# Installs the Debian packages Trireme's tests and tools need, if any is missing:
# MariaDB 10.11 (server, client, mariadb-backup), Galera 4 (the side-by-side reference),
# sysbench, and the tools MariaDB's SST scripts call (rsync, socat, iproute2 for `ss`).
set -euo pipefail

missing=0
for path in /usr/sbin/mariadbd /usr/bin/mariadb /usr/bin/mariadb-backup \
            /usr/lib/galera/libgalera_smm.so /usr/bin/sysbench /usr/bin/rsync \
            /usr/bin/socat /usr/bin/ss; do
  [ -e "$path" ] || missing=1
done
[ "$missing" = 1 ] || exit 0

echo "==> installing Debian packages: mariadb-server mariadb-client mariadb-backup galera-4 sysbench rsync socat iproute2"
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
# The packaged service is not used: clusters run their own mariadbd processes.
$sudo_cmd apt-get install -y -qq --no-install-recommends \
  mariadb-server mariadb-client mariadb-backup galera-4 sysbench rsync socat iproute2 >/dev/null
