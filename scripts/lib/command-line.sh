# shellcheck shell=bash
# Sourced by the scripts users run, so they answer as tensord and tensorctl
# do: --help prints the usage and exits 0; an unknown option exits 2 naming
# it and the closest known one. Source it before the script does anything
# (installs packages, builds), so both answers are immediate.
#   script_help                       prints the header comment of $0 (line 2 up
#                                     to `set -euo pipefail`) without its '# '
#   closest_option TYPED KNOWN...     prints the known option nearest to TYPED,
#                                     or nothing when none is near
#   refuse_option TYPED KNOWN...      says TYPED is unknown (and the nearest
#                                     known one) on stderr and exits 2
#   refuse_argument ARGUMENT          says a positional ARGUMENT was not expected
#                                     on stderr and exits 2
#   reject_unknown_options KNOWN... -- ARGS...
#                                     --help/-h: script_help, exit 0; any other
#                                     ARG starting with '-' that is not KNOWN
#                                     (KNOWN may end in '=': takes a value):
#                                     refuse_option
script_name=$(basename "$0")

script_help() {
  sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

# The rule of service/common/closest_name.cc: edit distance (with adjacent
# swaps) up to a third of the longer name, or a prefix of a known name.
closest_option() {
  awk 'function distance(a, b,    i, j, la, lb, d, cost, best) {
         la = length(a); lb = length(b)
         for (i = 0; i <= la; i++) d[i, 0] = i
         for (j = 0; j <= lb; j++) d[0, j] = j
         for (i = 1; i <= la; i++) {
           for (j = 1; j <= lb; j++) {
             cost = substr(a, i, 1) == substr(b, j, 1) ? 0 : 1
             best = d[i - 1, j] + 1
             if (d[i, j - 1] + 1 < best) best = d[i, j - 1] + 1
             if (d[i - 1, j - 1] + cost < best) best = d[i - 1, j - 1] + cost
             if (i > 1 && j > 1 && substr(a, i, 1) == substr(b, j - 1, 1) &&
                 substr(a, i - 1, 1) == substr(b, j, 1) && d[i - 2, j - 2] + 1 < best) {
               best = d[i - 2, j - 2] + 1
             }
             d[i, j] = best
           }
         }
         return d[la, lb]
       }
       BEGIN {
         typed = ARGV[1]; sub(/=.*/, "", typed); sub(/^-+/, "", typed)
         found = ""; found_score = 0
         for (k = 2; k < ARGC; k++) {
           option = ARGV[k]; sub(/=$/, "", option)
           name = option; sub(/^-+/, "", name)
           if (typed == "" || name == typed) continue
           longer = length(typed) > length(name) ? length(typed) : length(name)
           allowed = int(longer / 3); if (allowed < 1) allowed = 1
           d = distance(typed, name)
           score = d <= allowed ? 2 * d : -1
           if (index(name, typed) == 1 && (score < 0 || score > 3)) score = 3
           if (score >= 0 && (found == "" || score < found_score)) { found = option; found_score = score }
         }
         if (found != "") print found
         exit
       }' "$@"
}

refuse_option() {
  local typed=${1%%=*} near
  near=$(closest_option "$@")
  if [[ -n $near ]]; then
    echo "$script_name: unknown option '$typed'; did you mean '$near'?" >&2
  else
    echo "$script_name: unknown option '$typed'" >&2
  fi
  echo "Run '$0 --help' for usage." >&2
  exit 2
}

refuse_argument() {
  echo "$script_name: unexpected argument '$1'" >&2
  echo "Run '$0 --help' for usage." >&2
  exit 2
}

reject_unknown_options() {
  local known=() option argument takes_value=0
  while [[ $# -gt 0 && $1 != -- ]]; do known+=("$1"); shift; done
  shift || true
  for argument in "$@"; do
    if ((takes_value)); then takes_value=0; continue; fi
    case $argument in
      -h|--help) script_help; exit 0 ;;
      --) return 0 ;;
      -*) ;;
      *) continue ;;
    esac
    local matched=0
    for option in "${known[@]}"; do
      if [[ ${argument%%=*} == "${option%=}" ]]; then
        matched=1
        [[ $option == *= && $argument != *=* ]] && takes_value=1
        break
      fi
    done
    ((matched)) || refuse_option "$argument" --help "${known[@]}"
  done
}
