#!/usr/bin/env bash
# Set up everything the tests need (first time only: the system packages of the offline augmenters, with apt,
# and .venv), then run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! bash scripts/install_system_deps.sh; then
  if [ "${CI:-}" = "true" ]; then
    echo "error: the system packages could not be installed (bash scripts/install_system_deps.sh, as root)" >&2
    exit 1
  fi
  echo "warning: Apertium and WordNet could not be installed; run 'sudo bash scripts/install_system_deps.sh'." \
       "Until then the tests that need them are skipped." >&2
fi
bash scripts/setup_env.sh
exec .venv/bin/python -m pytest -q "$@"
