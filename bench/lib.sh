# Sourced by the bench scripts (from the repository's root).

# fresh_result NAME EXT: bench/results/NAME.EXT, or NAME-2.EXT, NAME-3.EXT, …,
# the first that does not exist yet: a second run on one day never overwrites
# the results of the first.
fresh_result() {
    local base="bench/results/$1" ext="$2" n=2 path
    path="$base.$ext"
    while [ -e "$path" ]; do
        path="$base-$n.$ext"
        n=$((n + 1))
    done
    echo "$path"
}
