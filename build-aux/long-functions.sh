#!/bin/sh
# build-aux/long-functions.sh FILE...: prints FILE:LINE:NAME:LENGTH for each function
# definition (a top-level "{" line after its head, through the top-level "}") longer than
# 100 lines whose comment just above does not say why ("long because ..."). Exit status 1
# when it printed anything. tests/style.bats runs it on lib/ and cmd/.
status=0
for f in "$@"; do
	awk -v file="$f" '
		/^\/\*/ { comment = ""; incomment = 1 }
		incomment { comment = comment " " $0; if ($0 ~ /\*\//) { incomment = 0; last_comment_end = NR } ; next }
		/^[A-Za-z_].*\(/ && !infunc { head = $0; headline = NR; if (last_comment_end != NR - 1) keep = ""; else keep = comment }
		/^\{/ && !infunc && head != "" { infunc = 1; start = NR; why = keep; next }
		/^\}/ && infunc {
			len = NR - start - 1
			if (len > 100 && tolower(why) !~ /long because/) {
				name = head; sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
				printf "%s:%d:%s:%d\n", file, headline, name, len
				bad = 1
			}
			infunc = 0; head = ""; keep = ""
		}
		/^$/ && !infunc { head = "" }
		END { exit bad }
	' "$f" || status=1
done
exit $status
