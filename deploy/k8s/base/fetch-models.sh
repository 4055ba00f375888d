#!/bin/sh
# Puts the model files a pod serves on its models volume before the server starts: the init
# container's command (deploy/k8s/base/deployment.yaml), as KServe's storage initializer does
# for an InferenceService. POSIX sh and curl, so that a small image runs it.
#
#   fetch-models.sh SOURCES DEST
#
# SOURCES has one line per file: `PATH URL SHA256`. PATH is where the file goes under DEST
# (the path models.yaml names under /models), URL where it comes from (https://, or file://),
# SHA256 its checksum, or `-` to take it unchecked. Blank lines and `#` comments are skipped.
# A file already in DEST with the right checksum is kept (a restarted pod, or a volume shared by
# several pods); a download goes to PATH.part and is renamed only once it checks out. HF_TOKEN,
# when set, is sent as a bearer token (gated Hugging Face repositories).
set -eu

if [ $# -ne 2 ]; then
  echo "usage: fetch-models.sh SOURCES DEST" >&2
  exit 2
fi
sources=$1
dest=$2

checksum() { sha256sum "$1" | cut -d ' ' -f 1; }

line=0
while read -r path url sha rest || [ -n "${path:-}" ]; do
  line=$((line + 1))
  case "$path" in '' | '#'*) continue ;; esac
  where="$sources:$line"
  if [ -z "${url:-}" ] || [ -z "${sha:-}" ] || [ -n "${rest:-}" ]; then
    echo "fetch-models: $where: expected PATH URL SHA256 (or - for no checksum)" >&2
    exit 1
  fi
  case "$path" in
    /* | ../* | */../* | *'/..' | '..')
      echo "fetch-models: $where: $path: a path inside $dest, without .." >&2
      exit 1 ;;
  esac
  case "$sha" in
    -) ;;
    *[!0-9a-f]*)
      echo "fetch-models: $where: $sha: expected 64 lower-case hex digits or -" >&2
      exit 1 ;;
    *)
      if [ ${#sha} -ne 64 ]; then
        echo "fetch-models: $where: $sha: expected 64 lower-case hex digits or -" >&2
        exit 1
      fi ;;
  esac
  target="$dest/$path"
  if [ -f "$target" ] && { [ "$sha" = - ] || [ "$(checksum "$target")" = "$sha" ]; }; then
    echo "fetch-models: $path: present"
    continue
  fi
  mkdir -p "$(dirname "$target")"
  part="$target.part"
  rm -f "$part"
  echo "fetch-models: $path: from $url"
  if [ -n "${HF_TOKEN:-}" ]; then
    curl -fsSL --retry 5 --retry-connrefused -H "Authorization: Bearer $HF_TOKEN" -o "$part" "$url"
  else
    curl -fsSL --retry 5 --retry-connrefused -o "$part" "$url"
  fi
  if [ "$sha" != - ]; then
    got=$(checksum "$part")
    if [ "$got" != "$sha" ]; then
      rm -f "$part"
      echo "fetch-models: $path: checksum $got, expected $sha; nothing kept" >&2
      exit 1
    fi
  fi
  mv "$part" "$target"
done < "$sources"
echo "fetch-models: done"
