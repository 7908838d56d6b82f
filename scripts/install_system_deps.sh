#!/usr/bin/env bash
# System packages the augmenters need (Debian/Ubuntu, as root): Apertium with the English<->Spanish
# pair (back-translation without model downloads) and the WordNet database files (synonym
# replacement). Idempotent: does nothing when everything is already installed.
set -euo pipefail
PACKAGES="apertium-eng-spa wordnet-base wordnet-sense-index"
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q $missing
