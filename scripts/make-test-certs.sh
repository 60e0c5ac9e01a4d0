#!/usr/bin/env bash
# Makes the certificates Trireme's TLS tests use, with the real openssl tool, in DIR:
#   ca.pem, ca.key                 the cluster CA (root)
#   intermediate.pem               an intermediate CA signed by the root
#   node.pem, node.key             a node certificate signed by the intermediate; node.pem
#                                  holds the leaf then the intermediate (the chain a node sends)
#   node-b.pem, node-b.key         a second node certificate (same chain), for reloads
#   rogue-ca.pem, rogue.pem, rogue.key   another CA and a node certificate it signed
#   expired.pem, expired.key       signed by the root, valid only in 2020
#   encrypted.key, password.txt    node.key encrypted as PKCS#8 with the password in password.txt
# Usage: scripts/make-test-certs.sh DIR
set -euo pipefail
dir=${1:?usage: make-test-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"

quiet() { "$@" >/dev/null 2>&1 || { echo "make-test-certs: failed: $*" >&2; "$@"; exit 1; }; }

key() { quiet openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

# A CA certificate (basicConstraints CA:true) for NAME with KEY, self-signed.
self_signed_ca() { # name key out
  quiet openssl req -x509 -new -key "$2" -subj "/O=Trireme test/CN=$1" -days 3650 -out "$3" \
    -addext "basicConstraints=critical,CA:true" -addext "keyUsage=critical,keyCertSign,cRLSign"
}

# A certificate for SUBJECT with KEY, signed by ISSUER_CERT/ISSUER_KEY; EXT picks CA or leaf.
signed() { # cn key issuer_cert issuer_key out ext
  local ext=$6
  printf '%s\n' "$ext" > ext.cnf
  quiet openssl req -new -key "$2" -subj "/O=Trireme test/CN=$1" -out req.csr
  quiet openssl x509 -req -in req.csr -CA "$3" -CAkey "$4" -CAcreateserial -days 3650 \
    -extfile ext.cnf -out "$5"
  rm -f req.csr ext.cnf
}

CA_EXT="basicConstraints=critical,CA:true
keyUsage=critical,keyCertSign,cRLSign"
LEAF_EXT="basicConstraints=critical,CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:trireme-node,IP:127.0.0.1"

key ca.key; self_signed_ca "Trireme test CA" ca.key ca.pem
key intermediate.key
signed "Trireme test intermediate" intermediate.key ca.pem ca.key intermediate.pem "$CA_EXT"
for name in node node-b; do
  key "$name.key"
  signed "$name" "$name.key" intermediate.pem intermediate.key "$name.leaf.pem" "$LEAF_EXT"
  cat "$name.leaf.pem" intermediate.pem > "$name.pem"
  rm -f "$name.leaf.pem"
done

key rogue-ca.key; self_signed_ca "Rogue CA" rogue-ca.key rogue-ca.pem
key rogue.key
signed "rogue node" rogue.key rogue-ca.pem rogue-ca.key rogue.pem "$LEAF_EXT"

# An expired certificate needs explicit dates, which only `openssl ca` sets in OpenSSL 3.0.
key expired.key
mkdir -p ca-db && : > ca-db/index.txt && echo 01 > ca-db/serial
cat > ca-db/ca.cnf <<CNF
[ca]
default_ca = test
[test]
database = ca-db/index.txt
serial = ca-db/serial
new_certs_dir = ca-db
default_md = sha256
policy = any
copy_extensions = none
x509_extensions = leaf
[leaf]
basicConstraints = critical,CA:false
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth,clientAuth
[any]
commonName = supplied
organizationName = optional
CNF
quiet openssl req -new -key expired.key -subj "/O=Trireme test/CN=expired node" -out req.csr
quiet openssl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca.key -in req.csr \
  -startdate 20200101000000Z -enddate 20201231000000Z -out expired.pem -notext
rm -rf req.csr ca-db

echo "trireme-secret" > password.txt
quiet openssl pkcs8 -topk8 -in node.key -out encrypted.key -v2 aes-256-cbc \
  -passout file:password.txt
chmod 0644 ./*.key ./*.pem password.txt
