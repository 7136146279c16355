#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""
examples.py - the command lines of README.md and of the man pages, extracted
from their sources and run as written, in order (issue 14 item 9).

    examples.py check DOC...          every example is marked; list them
    examples.py run [--readme-dir D] [--work W] DOC...
                                      run them, in the order given

DOC is README.md (Markdown) or a configured man page (roff, as installed).

Marking, so that extraction never guesses:
  Markdown  a ```sh fence is preceded by the line <!-- example --> or
            <!-- example: not run: REASON -->.  A fence without a language
            is an error (commands are sh, anything else says what it is,
            ```text for output).
  roff      a .EX line is preceded by the line .\\" example, .\\" example:
            not run: REASON, .\\" example: file NAME (the block is the
            file NAME, written where the page's examples run), or
            .\\" text (not a command: an output format, a path).

How a block runs:
  A block with lines that start with "$ " is a transcript: each command
  (with the lines of its here-document, or continued by a trailing
  backslash) runs with sh -c, standard output and error together, and
  what it prints must be exactly the lines the block shows after it.  The
  shell's own report of a death by a signal ("Bus error", as dash and
  interactive shells print it) counts as printed.
  Any other block is a script: it runs with sh -ec and must exit 0; what
  it prints is only shown.

README.md runs in --readme-dir (a clone of the repository); each man page
runs in a directory of its own under --work, so that its examples build on
each other but not on another page's.
"""

import os
import re
import subprocess
import sys

TIMEOUT = 300


class Block:
    def __init__(self, doc, line, mode, text, reason=None, name=None):
        self.doc = doc  # file name
        self.line = line  # line number of the first line of the block
        self.mode = mode  # run, skip, file
        self.text = text
        self.reason = reason
        self.name = name

    def where(self):
        return "%s:%d" % (os.path.basename(self.doc), self.line)


class Malformed(Exception):
    pass


# ---- Markdown ---------------------------------------------------------

MD_MARK = re.compile(r"^<!-- example(?:: (not run): (.+?))? -->$")


def markdown_blocks(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, errors = [], []
    i, mark, mark_line = 0, None, 0
    while i < len(lines):
        line = lines[i]
        m = MD_MARK.match(line)
        if m:
            if mark:
                errors.append("%s:%d: a marker without a ```sh block after it" % (path, mark_line))
            mark, mark_line = m, i + 1
            i += 1
            continue
        if line.startswith("```"):
            lang = line[3:].strip()
            end = i + 1
            while end < len(lines) and lines[end] != "```":
                end += 1
            if end == len(lines):
                raise Malformed("%s:%d: a fence that is never closed" % (path, i + 1))
            body = "\n".join(lines[i + 1:end]) + "\n"
            if lang == "":
                errors.append("%s:%d: a fence without a language (sh for commands, "
                              "text or another for the rest)" % (path, i + 1))
            elif lang == "sh":
                if not mark or mark_line != i:
                    errors.append("%s:%d: a ```sh block without <!-- example --> or "
                                  "<!-- example: not run: REASON --> on the line before" % (path, i + 1))
                elif mark.group(1):
                    blocks.append(Block(path, i + 2, "skip", body, reason=mark.group(2)))
                else:
                    blocks.append(Block(path, i + 2, "run", body))
            elif mark and mark_line == i:
                errors.append("%s:%d: an example marker on a ```%s block" % (path, i + 1, lang))
            mark = None
            i = end + 1
            continue
        if mark and line.strip():
            errors.append("%s:%d: a marker without a ```sh block right after it" % (path, mark_line))
            mark = None
        i += 1
    if mark:
        errors.append("%s:%d: a marker at the end of the file" % (path, mark_line))
    return blocks, errors


# ---- roff -------------------------------------------------------------

ROFF_MARK = re.compile(r'^\.\\" (?:(example)(?:: (?:(not run): (.+)|file (\S+)))?|(text))$')
# The escapes the pages use inside examples; anything else is an error, so
# that a new one is added here rather than run wrongly.
ROFF_ESCAPES = {
    r"\-": "-", r"\e": "\\", r"\(aq": "'", r"\(dq": '"', r"\(ga": "`",
    r"\(ti": "~", r"\(ha": "^", r"\&": "", r"\fB": "", r"\fI": "",
    r"\fR": "", r"\fP": "", r"\fC": "", r"\fCW": "",
}
ROFF_ESCAPE = re.compile(r"\\(\(..|f[BIRPC]W?|.)")


def unroff(text, where):
    def one(m):
        esc = m.group(0)
        if esc in ROFF_ESCAPES:
            return ROFF_ESCAPES[esc]
        raise Malformed("%s: unknown roff escape %s in an example" % (where, esc))
    return ROFF_ESCAPE.sub(one, text)


def roff_blocks(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, errors = [], []
    for i, line in enumerate(lines):
        if line != ".EX":
            continue
        end = i + 1
        while end < len(lines) and lines[end] != ".EE":
            end += 1
        if end == len(lines):
            raise Malformed("%s:%d: .EX without .EE" % (path, i + 1))
        m = ROFF_MARK.match(lines[i - 1]) if i > 0 else None
        if not m:
            errors.append('%s:%d: an .EX block without .\\" example, .\\" example: not run: '
                          'REASON, .\\" example: file NAME or .\\" text on the line before' % (path, i + 1))
            continue
        if m.group(5):  # text
            continue
        raw = lines[i + 1:end]
        for k, r in enumerate(raw):
            if r.startswith(".") or r.startswith("'"):
                errors.append("%s:%d: a roff request inside an example" % (path, i + 2 + k))
        where = "%s:%d" % (path, i + 2)
        body = unroff("\n".join(raw), where) + "\n"
        if m.group(2):
            blocks.append(Block(path, i + 2, "skip", body, reason=m.group(3)))
        elif m.group(4):
            blocks.append(Block(path, i + 2, "file", body, name=m.group(4)))
        else:
            blocks.append(Block(path, i + 2, "run", body))
    # A marker must mark something.
    for i, line in enumerate(lines):
        if ROFF_MARK.match(line) and (i + 1 >= len(lines) or lines[i + 1] != ".EX"):
            errors.append("%s:%d: a marker not followed by .EX" % (path, i + 1))
    return blocks, errors


def blocks_of(path):
    if path.endswith(".md"):
        return markdown_blocks(path)
    return roff_blocks(path)


# ---- running ----------------------------------------------------------

HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z_0-9]*)\1")
# bash (non-interactive) reports "sh: line 1: 1234 Bus error   command";
# dash and interactive shells print "Bus error".
BASH_SIGNAL = re.compile(r"^\S+: line \d+: +\d+ (\S.*?\S)(?: \(core dumped\))? {2,}.*$")


def transcript(text):
    """[(command, [expected lines])] of a block with "$ " prompts."""
    lines = text.rstrip("\n").split("\n")
    steps, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise Malformed("output before the first command: %r" % lines[i])
        cmd = [lines[i][2:]]
        i += 1
        while cmd[-1].endswith("\\") and i < len(lines):
            cmd.append(lines[i])
            i += 1
        for m in HEREDOC.finditer("\n".join(cmd)):
            while i < len(lines) and lines[i] != m.group(2):
                cmd.append(lines[i])
                i += 1
            if i == len(lines):
                raise Malformed("a here-document without its %s line" % m.group(2))
            cmd.append(lines[i])
            i += 1
        out = []
        while i < len(lines) and not lines[i].startswith("$ "):
            out.append(lines[i])
            i += 1
        steps.append(("\n".join(cmd), out))
    return steps


def run(cmd, cwd, shell_args):
    try:
        p = subprocess.run(["sh"] + shell_args + [cmd], cwd=cwd, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, "(killed after %d s)" % TIMEOUT
    out = p.stdout.decode("utf-8", "replace")
    return p.returncode, out


def show(text, prefix="    | "):
    for line in text.rstrip("\n").split("\n"):
        print(prefix + line)


def run_block(b, cwd):
    if b.mode == "file":
        with open(os.path.join(cwd, b.name), "w", encoding="utf-8") as f:
            f.write(b.text)
        print("ok: %s: wrote %s (%d lines)" % (b.where(), b.name, b.text.count("\n")))
        return True
    if not any(line.startswith("$ ") for line in b.text.split("\n")):
        print("run: %s (a script, in %s):" % (b.where(), cwd))
        show(b.text, "    $ ")
        status, out = run(b.text, cwd, ["-ec"])
        if out:
            show(out)
        if status != 0:
            print("FAIL: %s: exit status %s" % (b.where(), status))
            return False
        print("ok: %s" % b.where())
        return True
    ok = True
    print("run: %s (a transcript, in %s):" % (b.where(), cwd))
    for cmd, expected in transcript(b.text):
        show(cmd, "    $ ")
        status, out = run(cmd, cwd, ["-c"])
        got = [BASH_SIGNAL.sub(r"\1", line) for line in out.rstrip("\n").split("\n")] if out else []
        if status is None or got != expected:
            print("FAIL: %s: %s printed:" % (b.where(), cmd.split("\n")[0]))
            show(out or "(nothing)")
            print("  where the example shows:")
            show("\n".join(expected) or "(nothing)")
            ok = False
            break
        if out:
            show(out)
    if ok:
        print("ok: %s" % b.where())
    return ok


def main(argv):
    if len(argv) < 3 or argv[1] not in ("check", "run"):
        print(__doc__)
        return 2
    args = argv[2:]
    readme_dir, work = os.getcwd(), os.getcwd()
    while args and args[0].startswith("--"):
        if args[0] == "--readme-dir":
            readme_dir = args[1]
        elif args[0] == "--work":
            work = args[1]
        else:
            print("unknown option %s" % args[0])
            return 2
        args = args[2:]
    docs, errors = [], []
    for path in args:
        try:
            blocks, errs = blocks_of(path)
            for b in blocks:
                if b.mode == "run" and any(line.startswith("$ ") for line in b.text.split("\n")):
                    try:
                        transcript(b.text)
                    except Malformed as e:
                        errs.append("%s: %s" % (b.where(), e))
        except Malformed as e:
            errs = [str(e)]
            blocks = []
        docs.append((path, blocks))
        errors += errs
    for e in errors:
        print("FAIL: " + e)
    if errors:
        return 1
    total = sum(len(b) for _, b in docs)
    for path, blocks in docs:
        for b in blocks:
            if b.mode == "skip":
                print("not run: %s: %s" % (b.where(), b.reason))
    if argv[1] == "check":
        print("ok: %d examples in %d documents, every one marked" % (total, len(docs)))
        return 0
    failed = 0
    ran = 0
    for path, blocks in docs:
        if path.endswith(".md"):
            cwd = readme_dir
        else:
            cwd = os.path.join(work, os.path.basename(path))
            os.makedirs(cwd, exist_ok=True)
        for b in blocks:
            if b.mode == "skip":
                continue
            ran += 1
            if not run_block(b, cwd):
                failed += 1
                # Later examples build on this one.
                break
    print("examples: %d run, %d failed, %d not run (listed above)" %
          (ran, failed, sum(1 for _, bl in docs for b in bl if b.mode == "skip")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
