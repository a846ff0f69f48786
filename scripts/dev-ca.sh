#!/usr/bin/env bash
# A development certificate authority for Ringmaster's TLS (docs/security.md).
# NOT for production: the CA key sits beside the certificates, unencrypted.
#
# Usage: scripts/dev-ca.sh [--expired] OUTDIR [NAME ...]
#
# Writes into OUTDIR (created; files 0600, certificates 0644):
#   ca.crt, ca.key                 the CA (10 years)
#   coordinator.crt, .key          server certificate (serverAuth), SANs
#                                  localhost, 127.0.0.1, ::1 and every NAME
#                                  (an IP address becomes an IP SAN, anything
#                                  else a DNS SAN)
#   worker.crt, worker.key         client certificate for workers (clientAuth)
#   worker-expired.crt, .key       with --expired: a worker certificate signed
#                                  by the same CA that expired in 2020 (tests)
# Keys are EC P-256. An existing ca.key in OUTDIR is reused, so certificates
# can be added for new names without re-distributing ca.crt.
set -euo pipefail

expired=0
if [[ "${1:-}" == "--expired" ]]; then
  expired=1
  shift
fi
if [[ $# -lt 1 || "$1" == -* ]]; then
  echo "usage: $0 [--expired] OUTDIR [NAME ...]" >&2
  exit 2
fi
out=$1
shift
command -v openssl >/dev/null || { echo "dev-ca.sh: openssl is not installed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$out"
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

if [[ ! -s "$out/ca.key" || ! -s "$out/ca.crt" ]]; then
  newkey "$out/ca.key"
  openssl req -x509 -new -key "$out/ca.key" -sha256 -days 3650 -subj "/O=Ringmaster dev/CN=Ringmaster dev CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$out/ca.crt"
fi

sans="DNS:localhost,IP:127.0.0.1,IP:::1"
for name in "$@"; do
  if [[ "$name" =~ ^[0-9.]+$ || "$name" == *:* ]]; then sans+=",IP:$name"; else sans+=",DNS:$name"; fi
done

# sign NAME CN EKU SANS [openssl ca date flags...]: NAME.key + NAME.crt signed by the CA.
sign() {
  local name=$1 cn=$2 eku=$3 san=$4
  shift 4
  newkey "$out/$name.key"
  openssl req -new -key "$out/$name.key" -subj "/O=Ringmaster dev/CN=$cn" -out "$work/$name.csr"
  cat >"$work/$name.ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$eku
subjectAltName=$san
EOF
  if [[ $# -eq 0 ]]; then
    openssl x509 -req -in "$work/$name.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
      -CAserial "$work/ca.srl" -days 825 -sha256 -extfile "$work/$name.ext" -out "$out/$name.crt" 2>/dev/null
  else
    # `openssl x509` (3.0) cannot back-date; `openssl ca` takes explicit dates.
    mkdir -p "$work/ca"
    : >"$work/ca/index.txt"
    openssl rand -hex 16 >"$work/ca/serial"
    cat >"$work/ca.cnf" <<EOF
[ca]
default_ca = dev
[dev]
database = $work/ca/index.txt
serial = $work/ca/serial
new_certs_dir = $work/ca
default_md = sha256
policy = any
copy_extensions = none
unique_subject = no
[any]
organizationName = optional
commonName = supplied
EOF
    openssl ca -batch -notext -config "$work/ca.cnf" -cert "$out/ca.crt" -keyfile "$out/ca.key" \
      -in "$work/$name.csr" -extfile "$work/$name.ext" -out "$out/$name.crt" "$@" 2>/dev/null
  fi
  chmod 0644 "$out/$name.crt"
}

sign coordinator ringmaster-coordinator serverAuth "$sans"
sign worker ringmaster-worker clientAuth "DNS:ringmaster-worker"
if [[ $expired -eq 1 ]]; then
  sign worker-expired ringmaster-worker clientAuth "DNS:ringmaster-worker" \
    -startdate 20200101000000Z -enddate 20200102000000Z
fi
chmod 0644 "$out/ca.crt"
echo "dev CA in $out: ca.crt, coordinator.{crt,key} ($sans), worker.{crt,key}$([[ $expired -eq 1 ]] && echo ', worker-expired.{crt,key}')"
