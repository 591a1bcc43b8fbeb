#!/usr/bin/env bash
# Refreshes the Kubernetes protobuf definitions in this folder from a
# checkout of kube-rs/k8s-pb (README.md says which commit is here now):
#
#   apiserver/proto/refresh.sh /path/to/k8s-pb/k8s-pb-codegen
#
# Copies the GA API files and what they import, verbatim, plus
# openapi/transformed.json, and regenerates json-names.tsv from
# openapi/swagger.json. Needs python3.
set -euo pipefail
source=${1:?usage: refresh.sh K8S_PB_CODEGEN_DIR}
here=$(cd "$(dirname "$0")" && pwd)

find "$here" -name generated.proto -delete
copy() {
    mkdir -p "$here/$(dirname "$1")"
    cp "$source/protos/$1" "$here/$1"
}
for file in "$source"/protos/api/*/v[12]/generated.proto; do
    copy "${file#"$source/protos/"}"
done
copy apiextensions-apiserver/pkg/apis/apiextensions/v1/generated.proto
for package in apis/meta/v1 runtime runtime/schema util/intstr api/resource; do
    copy "apimachinery/pkg/$package/generated.proto"
done
cp "$source/openapi/transformed.json" "$here/transformed.json"
python3 "$here/json-names.py" "$here" "$source/openapi/swagger.json" >"$here/json-names.tsv"
find "$here" -type d -empty -delete
