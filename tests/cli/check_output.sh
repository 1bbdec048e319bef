#!/bin/sh
# usage: check_output.sh ok|fail REGEX command args...
# Runs the command; passes when its exit status is zero (ok) or non-zero (fail) AND its output (stdout and stderr
# together) matches the extended regular expression REGEX. CTest alone checks one or the other, never both.
want=$1 regex=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$want" = ok ] && [ "$rc" -ne 0 ]; then echo "check_output: exit status $rc, expected 0"; exit 1; fi
if [ "$want" = fail ] && [ "$rc" -eq 0 ]; then echo "check_output: exit status 0, expected non-zero"; exit 1; fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then echo "check_output: no line matches: $regex"; exit 1; fi
echo "check_output: exit status $rc and output as expected"
