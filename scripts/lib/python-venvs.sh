# shellcheck shell=bash
# Sourced by scripts that build the tensord Python module into venvs kept
# under BUILD_DIR/python-venvs (scripts/python-test.sh, scripts/weights-demo.sh).
# The caller sets `repo` (the repository root) and `build_dir` (absolute) first.
#   make_venv NAME REQUIREMENTS [venv args]   (re)creates BUILD_DIR/python-venvs/NAME
#   install_module NAME                       pip install ./python into it
venvs=$build_dir/python-venvs
# Same cache keys as scripts/build.sh, so the module's C++ objects hit ccache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$repo}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
export PIP_DISABLE_PIP_VERSION_CHECK=1

# make_venv NAME REQUIREMENTS [venv args]: (re)creates the venv when missing
# or when its requirements file changed.
make_venv() {
  local venv=$venvs/$1 requirements=$2
  shift 2
  if [[ -x $venv/bin/python ]] && cmp -s "$requirements" "$venv/.requirements"; then
    return
  fi
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$@" "$venv"
  "$venv/bin/pip" install -q -r "$requirements"
  cp "$requirements" "$venv/.requirements"
}

# install_module NAME: pip install ./python, reusing a CMake build folder per venv.
install_module() {
  "$venvs/$1/bin/pip" install -q --no-build-isolation --no-deps --force-reinstall "$repo/python" \
    --config-settings=build-dir="$build_dir/python-build/$1"
}
