#!/usr/bin/env bash
# Builds mmserve's image for one variant with the tag that variant's overlay deploys.
#
#   deploy/build-image.sh cpu|cuda|cann [IMAGE]     (from anywhere; IMAGE defaults to
#                                                     registry.example.com/mmserve)
#
#   cpu   IMAGE:latest       deploy/k8s/overlays/cpu, monitoring; deploy/kserve
#   cuda  IMAGE:latest-cuda  deploy/k8s/overlays/nvidia (MMSERVE_CUDA=ON)
#   cann  IMAGE:latest-cann  deploy/k8s/overlays/ascend (MMSERVE_CANN=ON; BASE=<a Debian 12
#                            image with the CANN toolkit>, which cannot be downloaded freely)
#
# BASE and RUNTIME_BASE, when set, are passed on. The builder is podman, else docker
# (MMSERVE_BUILDER picks one). Extra arguments for the builder go in MMSERVE_BUILD_ARGS.
set -euo pipefail

variant=${1:-}
image=${2:-registry.example.com/mmserve}
args=()
case "$variant" in
  cpu) tag=latest ;;
  cuda) tag=latest-cuda; args+=(--build-arg MMSERVE_CUDA=ON) ;;
  cann)
    tag=latest-cann
    if [[ -z "${BASE:-}" ]]; then
      echo "build-image.sh cann: set BASE to a Debian 12 image holding the CANN toolkit" >&2
      exit 2
    fi
    args+=(--build-arg MMSERVE_CANN=ON --build-arg "RUNTIME_BASE=${RUNTIME_BASE:-$BASE}") ;;
  *)
    echo "usage: build-image.sh cpu|cuda|cann [IMAGE]" >&2
    exit 2 ;;
esac
[[ -n "${BASE:-}" ]] && args+=(--build-arg "BASE=$BASE")
[[ -n "${RUNTIME_BASE:-}" && "$variant" != cann ]] && args+=(--build-arg "RUNTIME_BASE=$RUNTIME_BASE")

builder=${MMSERVE_BUILDER:-}
if [[ -z "$builder" ]]; then
  builder=$(command -v podman || command -v docker || true)
fi
if [[ -z "$builder" ]]; then
  echo "build-image.sh: neither podman nor docker is installed" >&2
  exit 1
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC2086  # MMSERVE_BUILD_ARGS is split on purpose
exec "$builder" build -f "$root/deploy/Containerfile" "${args[@]}" ${MMSERVE_BUILD_ARGS:-} \
  -t "$image:$tag" "$root"
