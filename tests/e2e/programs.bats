#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
#
# Real, unmodified Debian programs that are killed by SIGBUS today when a
# file they have mapped is truncated underneath them: each is shown dying
# without the library, and finishing under `nosigbus --policy=files`.
#
# The truncation is deterministic, at a point the program has reached:
#   python3  maps the file, then truncates it itself through another
#            descriptor (its script is input, the interpreter is Debian's);
#   sqlite3  (PRAGMA mmap_size) scans a table and truncates its own database
#            file from inside the scan, on the first row, with the shell's
#            writefile() SQL function; the next pages are beyond EOF;
#   git      cat-file --batch-check reads object names from a FIFO: the test
#            waits for the answer about a first object (the pack is mapped
#            then), truncates the pack, and asks for a second one.
#
# The files live in the test's temp directory, whatever its file system:
# --policy=files protects every regular file mapping.

load common

setup() {
	DIR=$BATS_TEST_TMPDIR
}

# --- python3 ---------------------------------------------------------------

# Maps two pages of "abc..." with the mmap module, truncates the file to 0
# through a second descriptor, then reads the whole mapping.
write_python_script() {
	cat >"$DIR/truncated.py" <<-'EOF'
		import mmap, sys
		path = sys.argv[1]
		size = 2 * mmap.PAGESIZE
		with open(path, "wb") as f:
		    f.write(bytes(ord("a") + i % 26 for i in range(size)))
		with open(path, "rb") as f:
		    m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
		print("mapped, starts with", m[0:3].decode(), flush=True)
		with open(path, "r+b") as other:
		    other.truncate(0)
		print("truncated", flush=True)
		data = m[:]
		print("read", len(data), "bytes, all zero:", data == bytes(size), flush=True)
	EOF
}

@test "python3 mmap: killed by SIGBUS without the library" {
	require "$PYTHON" python3
	write_python_script
	run -"$SIGBUS_STATUS" "$PYTHON" "$DIR/truncated.py" "$DIR/data"
	assert_output "mapped, starts with abc
truncated"
}

@test "python3 mmap: reads zeros under nosigbus --policy=files" {
	require "$PYTHON" python3
	write_python_script
	run -0 "$NSB_WRAPPER" --policy=files "$PYTHON" "$DIR/truncated.py" "$DIR/data"
	assert_output "mapped, starts with abc
truncated
read $((2 * $(getconf PAGESIZE))) bytes, all zero: True"
}

# --- sqlite3 ---------------------------------------------------------------

# A database of 200 rows of 2000 bytes (about a hundred pages), and the
# session that scans it after truncating it at the first row.
make_database() {
	DB=$DIR/test.db
	sqlite3 "$DB" <<-'EOF'
		CREATE TABLE t(id INTEGER PRIMARY KEY, b TEXT);
		WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 200)
		INSERT INTO t SELECT i, printf('%.2000c', 'x') FROM c;
	EOF
	[ "$(stat -c %s "$DB")" -gt 200000 ] || fail "the database is too small"
	cat >"$DIR/session.sql" <<-EOF
		PRAGMA mmap_size = 268435456;
		SELECT count(*) FROM t
		 WHERE CASE WHEN id = 1 THEN writefile('$DB', '') END IS NULL;
	EOF
}

@test "sqlite3 with mmap_size: killed by SIGBUS without the library" {
	require sqlite3 sqlite3
	make_database
	run -"$SIGBUS_STATUS" sqlite3 "$DB" <"$DIR/session.sql"
	assert_output 268435456
	# It really was the truncation: the file is empty now.
	assert_equal "$(stat -c %s "$DB")" 0
}

@test "sqlite3 with mmap_size: reports corruption under nosigbus --policy=files" {
	require sqlite3 sqlite3
	make_database
	run -1 --separate-stderr "$NSB_WRAPPER" --policy=files sqlite3 "$DB" <"$DIR/session.sql"
	assert_output 268435456
	# shellcheck disable=SC2154 # set by run --separate-stderr
	[[ $stderr == *"database disk image is malformed"* ]] ||
		fail "sqlite3 did not report the zeros as corruption: $stderr"
	assert_equal "$(stat -c %s "$DB")" 0
}

# --- git -------------------------------------------------------------------

# A repository with one pack of 20 blobs; FIRST and SECOND name two of them.
make_repository() {
	local i
	REPO=$DIR/repo
	# No user or system configuration (signing, hooks, templates).
	export HOME=$DIR GIT_CONFIG_NOSYSTEM=1
	git init -q "$REPO"
	for ((i = 1; i <= 20; i++)); do
		seq $((i * 1000)) >"$REPO/f$i"
	done
	git -C "$REPO" add .
	GIT_AUTHOR_NAME=nsb GIT_AUTHOR_EMAIL=nsb@example.invalid \
		GIT_COMMITTER_NAME=nsb GIT_COMMITTER_EMAIL=nsb@example.invalid \
		git -C "$REPO" commit -q -m e2e
	git -C "$REPO" repack -a -d -q
	PACK=$(echo "$REPO"/.git/objects/pack/pack-*.pack)
	[ -f "$PACK" ] || fail "no single pack in $REPO"
	FIRST=$(git -C "$REPO" rev-parse HEAD:f1)
	SECOND=$(git -C "$REPO" rev-parse HEAD:f20)
}

# Runs "$@" git cat-file --batch-check with its stdin and stdout on FIFOs:
# asks about FIRST, waits for the answer, truncates the pack, asks about
# SECOND.  Sets status, and output to all git printed on stdout.
git_truncated_pack() {
	local pid line rest
	mkfifo "$DIR/git.in" "$DIR/git.out"
	"$@" git -C "$REPO" cat-file --batch-check <"$DIR/git.in" \
		>"$DIR/git.out" 2>"$DIR/git.err" 3>&- &
	pid=$!
	exec {to_git}>"$DIR/git.in"
	exec {from_git}<"$DIR/git.out"
	echo "$FIRST" >&"$to_git"
	# Safety bound only: git answers at once.
	IFS= read -r -t 20 -u "$from_git" line || fail "git did not answer"
	assert_equal "$line" "$FIRST blob $(stat -c %s "$REPO/f1")"
	# git makes packs read-only; only root writes them anyway (issue 23).
	chmod u+w "$PACK"
	truncate -s 0 "$PACK"
	echo "$SECOND" >&"$to_git"
	exec {to_git}>&-
	rest=$(cat <&"$from_git")
	exec {from_git}<&-
	status=0
	wait "$pid" || status=$?
	output=$line${rest:+$'\n'$rest}
}

@test "git cat-file on a truncated pack: killed by SIGBUS without the library" {
	require git git
	make_repository
	git_truncated_pack
	assert_equal "$status" "$SIGBUS_STATUS"
	assert_output "$FIRST blob $(stat -c %s "$REPO/f1")"
}

@test "git cat-file on a truncated pack: reports the object under nosigbus --policy=files" {
	require git git
	make_repository
	git_truncated_pack "$NSB_WRAPPER" --policy=files
	assert_equal "$status" 0
	assert_output "$FIRST blob $(stat -c %s "$REPO/f1")
$SECOND missing"
	run -0 cat "$DIR/git.err"
	assert_output --partial "unknown object type 0"
}
