#!/bin/sh
# build-aux/include-graph.sh [SRCDIR]: checks that lib/ keeps its layers. Each folder of lib/
# has a rank; a file may include a header of its own folder or of a folder of lower rank,
# never one of the same rank elsewhere (run, sandbox and package never include each other)
# or of a higher one, and never a header of cmd/. sandbox/ and sandbox/local/ are one
# subsystem (the state machine names the local provider's table). Headers that are not in
# lib/ must be the build's generated ones (box-paths.h). Prints FILE:LINE: reason for each
# fault; exit status 1 when it printed anything. tests/style.bats runs it.
src=${1:-.}
cd "$src/lib" || exit 2

# rank FOLDER: the layer of a folder of lib/, empty for an unknown one
rank() {
	case $1 in
	core) echo 0 ;;
	net) echo 1 ;;
	artifact) echo 2 ;;
	tools) echo 3 ;;
	package | run | sandbox | sandbox/local) echo 4 ;;
	mcp) echo 5 ;;
	esac
}

# the subsystem of a folder: sandbox/local belongs to sandbox
subsystem() {
	case $1 in
	sandbox/*) echo sandbox ;;
	*) echo "$1" ;;
	esac
}

status=0
headers=$(find . -name '*.h' | sed 's|^\./||')
for f in $(find . -name '*.[ch]' | sed 's|^\./||' | sort); do
	dir=${f%/*}
	[ "$dir" = "$f" ] && dir=.
	r=$(rank "$dir")
	if [ -z "$r" ]; then
		echo "lib/$f:1: lib/$dir is not one of the folders this check knows (add its rank)"
		status=1
		continue
	fi
	grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
		sed 's/^\([0-9]*\):.*"\(.*\)".*/\1 \2/' >"${TMPDIR:-/tmp}/include-graph.$$"
	while read -r line h; do
		case $h in
		box-paths.h) continue ;;
		esac
		hits=$(printf '%s\n' "$headers" | grep -E "(^|/)$(printf '%s' "$h" | sed 's/[.]/[.]/g')\$")
		n=$(printf '%s' "$hits" | grep -c .)
		if [ "$n" -eq 0 ]; then
			if [ -f "../cmd/$h" ]; then
				echo "lib/$f:$line: includes cmd/$h: lib/ never includes cmd/"
			else
				echo "lib/$f:$line: includes $h, which is no header of lib/"
			fi
			status=1
			continue
		fi
		if [ "$n" -gt 1 ]; then
			echo "lib/$f:$line: $h is the name of more than one header of lib/:" $hits
			status=1
			continue
		fi
		hdir=${hits%/*}
		[ "$hdir" = "$hits" ] && hdir=.
		[ "$hdir" = "$dir" ] && continue
		[ "$(subsystem "$hdir")" = "$(subsystem "$dir")" ] && continue
		hr=$(rank "$hdir")
		if [ -z "$hr" ] || [ "$hr" -ge "$r" ]; then
			echo "lib/$f:$line: lib/$dir includes lib/$hdir/$h: only folders below it may be included"
			status=1
		fi
	done <"${TMPDIR:-/tmp}/include-graph.$$"
	rm -f "${TMPDIR:-/tmp}/include-graph.$$"
done
exit $status
