"""Read the commands a launch script runs, without running it: a small, honest subset of bash.

Launch scripts for Megatron-LM, torchtitan and DeepSpeed build their argument lists in shell variables
(``GPUS_PER_NODE=8``, ``${MASTER_PORT:-6000}``, ``$((GPUS_PER_NODE*NUM_NODES))``, arrays
``ARGS=( ... )`` expanded with ``${ARGS[@]}``, ``ARGS+=(...)``, strings grown with ``opts="${opts} --x"``,
``if [[ "$DTYPE" == "fp8" ]]; then ... fi``, ``eval ${run_cmd}``).  This module walks the script
statement by statement, keeps the variables it can know, and returns every other command with its
words expanded, each word tagged with the file line it was written on.

We lex words ourselves instead of calling ``shlex.split`` on substituted text: an expansion splits into
words only when it is unquoted (``${ARGS[@]}`` vs ``"${ARGS[@]}"``, ``"--fp8-format hybrid"`` as one
array element that splits when expanded unquoted), and shlex cannot tell which parts of a word were
quoted.  Plain argument-list files go through the same lexer.

What is not known is never guessed: a variable set outside the file (``$1``, ``$HOSTNAME``), a command
substitution ``$(...)`` or an ``if`` whose condition tests files or runs commands leaves its words
marked ``unresolved`` or ``uncertain``; the caller raises an error only if such a word sets a layout
field.  ``${VAR:-default}`` with VAR not set in the file takes the default (the script run with no
arguments and a clean environment); ``$@`` and ``$*`` expand to nothing for the same reason.
Not supported (their bodies are read as uncertain): loops, ``case``, functions, here-documents.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path

from placement.errors import InputError
from placement.loaders.files import read_text

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?=)")
_CONTROL_OPEN = {"for", "while", "until", "case", "select", "function"}
_CONTROL_CLOSE = {"done", "esac"}
_DECLARE = {"export", "declare", "local", "readonly", "typeset"}


@dataclass(frozen=True)
class Origin:
    path: str
    line: int
    text: str
    """The physical source line, stripped."""

    def __str__(self) -> str:
        text = self.text if len(self.text) <= 400 else f"{self.text[:300]} ... {self.text[-60:]}"  # messages stay short
        return f"{self.path}:{self.line}: {text}"


@dataclass(frozen=True)
class Word:
    """One argument of a command after expansion."""

    text: str
    origin: Origin
    """Where the word's first character was written (for an expanded variable: its assignment)."""
    site: Origin
    """Where the word appears in the command (the line of `$VAR` or `${ARGS[@]}` for expanded words)."""
    unresolved: str | None = None
    """The variable or construct whose value is unknown, if any part of the word depends on one."""
    uncertain: str | None = None
    """Why the word may or may not be there (an `if` that cannot be evaluated)."""

    @property
    def evidence(self) -> str:
        if self.origin == self.site:
            return str(self.site)
        return f"{self.origin} (expanded at {self.site.path}:{self.site.line})"


@dataclass(frozen=True)
class Command:
    words: tuple[Word, ...]
    origin: Origin


@dataclass
class _Seg:
    """A run of characters of a word being built; `split` marks unquoted expansion results."""

    text: str
    split: bool
    origin: Origin
    unresolved: str | None = None
    uncertain: str | None = None
    brk: bool = False
    """A forced word break (between the elements of a quoted "${A[@]}")."""


@dataclass
class _Var:
    value: list[_Seg] | None = None
    """Scalar value (segments keep their origins)."""
    items: list[list[_Seg]] | None = None
    """Array elements."""


@dataclass
class _State:
    path: str
    lines: list[str]
    vars: dict[str, _Var] = field(default_factory=dict)
    frames: list[list] = field(default_factory=list)
    """Open `if` blocks: [mode, taken, origin] with mode "on" / "off" / "uncertain"."""
    commands: list[Command] = field(default_factory=list)
    depth: int = 0
    """Nesting of `bash -c STRING` runs (bounded: MAX_NESTED_SHELLS)."""


MAX_NESTED_SHELLS = 8
_CONTROL_OPS = {"&&", "||", "|", "|&", "&"}
"""Unquoted operators that end one simple command and start the next (a pipeline's or list's parts)."""


def read_commands(path: Path) -> list[Command]:
    """The commands `path` runs, in order, with words expanded as far as the file determines them."""
    text = read_text(path, "launch script", "expected a shell script or an argument list")
    state = _State(str(path), text.splitlines())
    _sbatch_environment(state)
    for stmt in _statements(state, text):
        _run(state, stmt)
    return state.commands


# ---------------------------------------------------------------------------------------------------
# Statements: join continuations and multi-line quotes/arrays, drop comments, split at `;`.


@dataclass
class _Stmt:
    chars: str
    lines: list[int]
    """Line number of every character of `chars`."""


_SBATCH_ENV = {"nodes": ("SLURM_NNODES", "SLURM_JOB_NUM_NODES"), "ntasks-per-node": ("SLURM_NTASKS_PER_NODE",),
               "gpus-per-node": ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE")}
"""sbatch option -> the variables SLURM sets from it in the job's environment (sbatch(1) OUTPUT ENVIRONMENT
VARIABLES); `--gres=gpu:N` sets SLURM_GPUS_ON_NODE too."""


def _sbatch_environment(state: _State) -> None:
    """`#SBATCH --nodes=48` (or `-N 48`, `--gres=gpu:8`...) fixes SLURM_NNODES & co. for the script, as sbatch
    does; a range (`--nodes=2-4`) fixes nothing.  Only the header's directives count (sbatch stops reading them at
    the first command)."""
    for n, raw in enumerate(state.lines, 1):
        line = raw.strip()
        if line and not line.startswith("#"):
            break
        m = re.match(r"#SBATCH\s+(?:--(nodes|ntasks-per-node|gpus-per-node|gres)[=\s]+|-N\s*)(\S+)", line)
        if not m:
            continue
        option, value = m.group(1) or "nodes", m.group(2)
        if option == "gres":
            g = re.fullmatch(r"gpu(?::[\w-]+)?:(\d+)", value)
            option, value = ("gpus-per-node", g.group(1)) if g else (None, "")
        if option is None or not value.isdigit():
            continue
        for name in _SBATCH_ENV[option]:
            state.vars.setdefault(name, _Var(value=[_Seg(value, False, Origin(state.path, n, line))]))


def _statements(state: _State, text: str) -> list[_Stmt]:
    out: list[_Stmt] = []
    chars: list[str] = []
    lines: list[int] = []
    quote = ""
    depth = 0
    i, line = 0, 1
    n = len(text)

    def flush() -> None:
        s = "".join(chars)
        if s.strip():
            out.append(_Stmt(s, list(lines)))
        chars.clear()
        lines.clear()

    def at_word_start() -> bool:
        return not chars or chars[-1] in " \t\n;(|&"

    while i < n:
        c = text[i]
        if quote == "'":
            chars.append(c), lines.append(line)
            if c == "'":
                quote = ""
        elif c == "\\" and i + 1 < n:
            if text[i + 1] == "\n":  # line continuation (also inside double quotes)
                i += 2
                line += 1
                continue
            chars.extend((c, text[i + 1])), lines.extend((line, line))
            i += 2
            continue
        elif quote == '"':
            chars.append(c), lines.append(line)
            if c == '"':
                quote = ""
        elif c in "'\"":
            quote = c
            chars.append(c), lines.append(line)
        elif c == "#" and at_word_start():
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif c == "(":
            depth += 1
            chars.append(c), lines.append(line)
        elif c == ")":
            depth = max(depth - 1, 0)
            chars.append(c), lines.append(line)
        elif c == ";" and depth == 0 and not (i + 1 < n and text[i + 1] == ";"):
            flush()
        elif c == "\n" and depth == 0:
            flush()
        else:
            chars.append(c if c != "\n" else " "), lines.append(line)
        if c == "\n":
            line += 1
        i += 1
    if quote:
        raise InputError(f"{state.path}:{lines[0] if lines else line}: a {quote} quote opened here is never closed; "
                         f"expected a balanced shell script")
    flush()
    return out


# ---------------------------------------------------------------------------------------------------
# Lexing one statement into raw words (lists of parts), then expanding them.


@dataclass
class _Part:
    kind: str  # "lit", "param", "arith", "cmdsub", "array"
    text: str
    quoted: bool
    origin: Origin
    arg: str = ""
    """For "param": the operator and word of ${NAME<op>word}."""


def _origin(state: _State, line: int) -> Origin:
    raw = state.lines[line - 1].strip() if 0 < line <= len(state.lines) else ""
    return Origin(state.path, line, raw)


def _lex(state: _State, stmt: _Stmt, start: int = 0, stop: int | None = None) -> list[list[_Part]]:
    """Split `stmt.chars[start:stop]` into words of parts (array bodies `NAME=( ... )` stay one word)."""
    s, ln = stmt.chars, stmt.lines
    stop = len(s) if stop is None else stop
    words: list[list[_Part]] = []
    cur: list[_Part] = []
    started = False
    i = start

    def lit(text: str, quoted: bool, at: int) -> None:
        if cur and cur[-1].kind == "lit" and cur[-1].quoted == quoted and cur[-1].origin.line == ln[at]:
            cur[-1].text += text
        else:
            cur.append(_Part("lit", text, quoted, _origin(state, ln[at])))

    while i < stop:
        c = s[i]
        if c in " \t":
            if started:
                words.append(cur)
                cur, started = [], False
            i += 1
            continue
        started = True
        if c == "'":
            j = s.find("'", i + 1)
            if j < 0:
                org = _origin(state, ln[i])
                raise InputError(f"{org.path}:{org.line}: a single quote is never closed; close it in: {org.text}")
            lit(s[i + 1:j], True, i)
            i = j + 1
        elif c == '"':
            i = _lex_double(state, stmt, i + 1, cur, lit)
        elif c == "\\":
            lit(s[i + 1:i + 2], True, i)
            i += 2
        elif c == "$":
            i = _lex_dollar(state, stmt, i, False, cur, lit)
        elif c == "`":
            j = s.find("`", i + 1)
            j = stop if j < 0 else j
            cur.append(_Part("cmdsub", s[i:j + 1], False, _origin(state, ln[i])))
            i = j + 1
        elif c in "|&<>":
            # control operators and redirections are words of their own (kind "op"); a redirection's fd
            # number (`2>`) belongs to it, and `>&1` / `2>&1` carry their target
            fd = "".join(p.text for p in cur) if cur and all(p.kind == "lit" and not p.quoted for p in cur) else ""
            if c in "<>" and fd.isdigit():
                cur.clear()
            elif cur:
                words.append(cur)
            cur, started = [], False
            j = i + 1
            if c in "|&" and j < stop and s[j] in ("|&" if c == "|" else "&>"):
                j += 1
            elif c in "<>" and j < stop and s[j] in ">&":
                j += 1
                while s[j - 1] == "&" and j < stop and (s[j].isdigit() or s[j] == "-"):
                    j += 1
            text = fd + s[i:j] if c in "<>" else s[i:j]
            words.append([_Part("op", text, False, _origin(state, ln[i]))])
            i = j
        elif c == "(" and cur and cur[-1].kind == "lit" and not cur[-1].quoted and _ASSIGN.match(cur[-1].text) \
                and cur[-1].text.endswith("="):
            j = _matching(s, i, stop)
            cur.append(_Part("array", "", False, _origin(state, ln[i]), arg=f"{i + 1}:{j}"))
            i = j + 1
        else:
            lit(c, False, i)
            i += 1
    if started:
        words.append(cur)
    return words


def _matching(s: str, i: int, stop: int) -> int:
    """Index of the `)` closing the `(` at i (quotes respected)."""
    depth, quote = 0, ""
    while i < stop:
        c = s[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return stop - 1


def _lex_double(state: _State, stmt: _Stmt, i: int, cur: list[_Part], lit) -> int:
    s = stmt.chars
    while i < len(s) and s[i] != '"':
        c = s[i]
        if c == "\\" and i + 1 < len(s) and s[i + 1] in '$`"\\':
            lit(s[i + 1], True, i)
            i += 2
        elif c == "$":
            i = _lex_dollar(state, stmt, i, True, cur, lit)
        elif c == "`":
            j = s.find("`", i + 1)
            cur.append(_Part("cmdsub", s[i:j + 1], True, _origin(state, stmt.lines[i])))
            i = j + 1
        else:
            lit(c, True, i)
            i += 1
    if not cur:
        lit("", True, max(i - 1, 0))
    return i + 1


def _closing_brace(s: str, i: int) -> int:
    """Index of the `}` that closes a ${...} opened before i, skipping quoted text (${X:-'}'}); -1 if none."""
    quote = ""
    while i < len(s):
        c = s[i]
        if quote:
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"':
                i += 1
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 1
        elif c == "}":
            return i
        i += 1
    return -1


def _lex_dollar(state: _State, stmt: _Stmt, i: int, quoted: bool, cur: list[_Part], lit) -> int:
    s, ln = stmt.chars, stmt.lines
    org = _origin(state, ln[i])
    nxt = s[i + 1] if i + 1 < len(s) else ""
    if s.startswith("$((", i):
        j = s.find("))", i + 3)
        if j < 0:
            raise InputError(f"{org.path}:{org.line}: `$((` is never closed; expected $(( expression )) in: {org.text}")
        cur.append(_Part("arith", s[i + 3:j], quoted, org))
        return j + 2
    if nxt == "(":
        j = _matching(s, i + 1, len(s))
        cur.append(_Part("cmdsub", s[i:j + 1], quoted, org))
        return j + 1
    if nxt == "{":
        j = _closing_brace(s, i + 2)
        if j < 0:
            raise InputError(f"{org.path}:{org.line}: `${{` is never closed; expected ${{NAME}} in: {org.text}")
        body = s[i + 2:j]
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!])(\[[@*0-9]+\])?(.*)$", body, re.S)
        if not m:
            cur.append(_Part("cmdsub", s[i:j + 1], quoted, org))
        else:
            cur.append(_Part("param", m.group(1), quoted, org, arg=(m.group(2) or "") + "\0" + m.group(3)))
        return j + 1
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!]", s[i + 1:])
    if m:
        cur.append(_Part("param", m.group(0), quoted, org, arg="\0"))
        return i + 1 + len(m.group(0))
    lit("$", quoted, i)
    return i + 1


# ---------------------------------------------------------------------------------------------------
# Expansion


def _mode(state: _State) -> tuple[str, str | None]:
    """("off" | "uncertain" | "on", reason)."""
    reason = None
    for mode, _, org in state.frames:
        if mode == "off":
            return "off", None
        if mode == "uncertain" and reason is None:
            reason = f"set inside the block at {org.path}:{org.line} ({org.text}), whose condition cannot be evaluated"
    return ("uncertain", reason) if reason else ("on", None)


def _param_value(state: _State, part: _Part) -> list[list[_Seg]] | None:
    """Value of a parameter part as a list of fields (None: unknown)."""
    name = part.text
    index, _, op_arg = part.arg.partition("\0")
    var = state.vars.get(name)
    if name in ("@", "*"):
        return []
    if index in ("[@]", "[*]"):
        if var is None:
            return None
        if var.items is not None:
            return [list(x) for x in var.items]
        return [list(var.value or [])]
    if index:  # ${A[0]}; any other subscript (${A[0*]}, ${A[@@]}) is a value the reader does not know
        if not index[1:-1].isdigit():
            return None
        k = int(index[1:-1])
        if var is None or var.items is None or k >= len(var.items):
            return None
        return [list(var.items[k])]
    value = None
    if var is not None:
        value = var.value if var.items is None else (var.items[0] if var.items else [])
    if not op_arg:
        return None if value is None else [list(value)]
    m = re.match(r"(:?[-=+?])(.*)$", op_arg, re.S)
    if not m:
        return None
    op, word = m.groups()
    empty = value is None or (op.startswith(":") and not "".join(x.text for x in value))
    if op in (":-", "-", ":=", "="):
        if not empty or (op in ("-", "=") and value is not None):
            return [list(value)]
        sub = _expand_text(state, word, part.origin)
        if op in (":=", "="):
            state.vars[name] = _Var(value=sub)
        return [sub]
    if op in (":+", "+"):
        return [] if empty else [_expand_text(state, word, part.origin)]
    return None


def _expand_text(state: _State, text: str, org: Origin) -> list[_Seg]:
    """Expand a word given as text (a ${VAR:-word} default) into one field."""
    stmt = _Stmt(text, [org.line] * len(text))
    segs: list[_Seg] = []
    for word in _lex(state, stmt):
        if segs:
            segs.append(_Seg(" ", False, org))
        for fieldsegs in _expand_parts(state, word, as_field=True):
            segs.extend(fieldsegs)
    return segs


_ARITH_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def _arith(state: _State, expr: str) -> int | None:
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        var = state.vars.get(name)
        if var is None or var.value is None:
            raise KeyError(name)
        return "".join(x.text for x in var.value).strip() or "0"

    try:
        text = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)|\b([A-Za-z_][A-Za-z0-9_]*)\b",
                      sub, expr)
        tree = ast.parse(text.replace("/", "//").strip(), mode="eval")
    except (KeyError, SyntaxError, RecursionError, MemoryError):
        return None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            return _ARITH_OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError(ast.dump(node))

    try:
        value = ev(tree.body)
    except (ValueError, ZeroDivisionError, RecursionError, OverflowError, MemoryError):
        return None
    return value if abs(value) < 2**63 else None  # bash's arithmetic is 64-bit; past it, not a launch value


def _expand_parts(state: _State, parts: list[_Part], as_field: bool = False) -> list[list[_Seg]]:
    """Expand one raw word into fields (lists of segments); unquoted expansions split at whitespace
    unless `as_field` (assignment right-hand sides never split)."""
    segs: list[_Seg] = []
    has_quoted = False
    for p in parts:
        split = not p.quoted and not as_field
        has_quoted |= p.quoted
        if p.kind == "lit":
            segs.append(_Seg(p.text, False, p.origin))
        elif p.kind == "arith":
            v = _arith(state, p.text)
            if v is None:
                segs.append(_Seg(f"$(({p.text}))", False, p.origin, unresolved=f"$(({p.text}))"))
            else:
                segs.append(_Seg(str(v), split, p.origin))
        elif p.kind == "cmdsub":
            segs.append(_Seg(p.text, False, p.origin, unresolved=p.text))
        elif p.kind == "param":
            fields = _param_value(state, p)
            if fields is None:
                shown = "${" + p.text + p.arg.replace("\0", "") + "}"
                index = p.arg.partition("\0")[0]
                # a subscript the reader cannot evaluate is named as written, not as an unset variable
                segs.append(_Seg(shown, False, p.origin, unresolved=shown if index and p.text in state.vars
                                 else "$" + p.text))
                continue
            star = p.arg.partition("\0")[0] == "[*]"
            for k, f in enumerate(fields):
                if k and p.quoted and star:  # "${A[*]}": one word, the elements joined by a space
                    segs.append(_Seg(" ", False, p.origin))
                elif k and p.quoted:
                    segs.append(_Seg("", False, p.origin, brk=True))
                elif k:
                    segs.append(_Seg(" ", True, p.origin))
                for x in f:
                    segs.append(_Seg(x.text, split and not x.unresolved, x.origin, x.unresolved, x.uncertain))
    return _split(segs, keep_empty=has_quoted)


def _split(segs: list[_Seg], keep_empty: bool) -> list[list[_Seg]]:
    fields: list[list[_Seg]] = []
    cur: list[_Seg] = []
    nonempty = False
    for s in segs:
        if s.brk:
            fields.append(cur)
            cur, nonempty = [], False
            continue
        if not s.split:
            cur.append(s)
            nonempty = True
            continue
        pieces = re.split(r"(\s+)", s.text)
        for piece in pieces:
            if not piece:
                continue
            if piece.isspace():
                if cur and (nonempty or any(x.text for x in cur)):
                    fields.append(cur)
                cur, nonempty = [], False
            else:
                cur.append(_Seg(piece, False, s.origin, s.unresolved, s.uncertain))
                nonempty = True
    if cur and (nonempty or keep_empty):
        fields.append(cur)
    elif not fields and keep_empty:
        fields.append([])
    return fields


def _to_word(f: list[_Seg], site: Origin, uncertain: str | None) -> Word:
    text = "".join(x.text for x in f)
    first = next((x for x in f if x.text), f[0] if f else None)
    origin = first.origin if first else site
    unresolved = next((x.unresolved for x in f if x.unresolved), None)
    unc = next((x.uncertain for x in f if x.uncertain), None) or uncertain
    return Word(text, origin, site, unresolved, unc)


# ---------------------------------------------------------------------------------------------------
# Running statements


def _run(state: _State, stmt: _Stmt | None) -> None:
    """Run one statement; `then cmd`, `do cmd` and `else cmd` run the rest in a loop (not recursion: a
    script of 5,000 `do`s must not exhaust the stack)."""
    while stmt is not None:
        stmt = _run_one(state, stmt)


def _run_one(state: _State, stmt: _Stmt) -> _Stmt | None:
    """Run a statement; returns what follows a leading keyword, still to run."""
    words = _lex(state, stmt)
    if not words:
        return None
    first = _plain(words[0])
    org = _origin(state, stmt.lines[0])
    if first in ("if", "elif"):
        _open_if(state, first, words[1:], org)
        return None
    if first in ("then", "do"):
        return _Stmt(*_rest(stmt, words)) if len(words) > 1 else None
    if first == "else":
        _else(state, org)
        return _Stmt(*_rest(stmt, words)) if len(words) > 1 else None
    if first == "fi":
        if state.frames and state.frames[-1][0] != "loop":
            state.frames.pop()
        return None
    if first in _CONTROL_OPEN or (first or "").endswith("()") or first == "{":
        state.frames.append(["uncertain", True, org])
        return None
    if first in _CONTROL_CLOSE or first == "}":
        if state.frames:
            state.frames.pop()
        return None
    mode, reason = _mode(state)
    if mode == "off":
        return None
    for segment in _segments(words):  # `a && b`, `a | tee log`: each simple command on its own
        _simple_command(state, stmt, segment, org, reason)
    return None


def _is_op(word: list[_Part]) -> bool:
    return len(word) == 1 and word[0].kind == "op"


def _segments(words: list[list[_Part]]) -> list[list[list[_Part]]]:
    """The simple commands of a list or pipeline, without their redirections (`> log`, `2>&1`, `&> f`)."""
    out: list[list[list[_Part]]] = [[]]
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if _is_op(w) and w[0].text in _CONTROL_OPS:
            out.append([])
        elif _is_op(w):
            skip = not re.search(r"&(\d+|-)$", w[0].text)  # `>&1` carries its target; `> f` takes the next word
        else:
            out[-1].append(w)
    return [x for x in out if x]


def _simple_command(state: _State, stmt: _Stmt, words: list[list[_Part]], org: Origin, reason: str | None) -> None:
    first = _plain(words[0])
    k = 0
    if first in _DECLARE:
        k = 1
        while k < len(words) and _plain(words[k]).startswith("-"):
            k += 1
    while k < len(words) and _is_assignment(words[k]):
        _assign(state, stmt, words[k], reason)
        k += 1
    if k >= len(words) or first in _DECLARE:
        return
    rest = words[k:]
    if _plain(rest[0]) == "eval":
        rest = rest[1:]
    fields: list[Word] = []
    for w in rest:
        site = w[0].origin if w else org
        fields += [_to_word(f, site, reason) for f in _expand_parts(state, w)]
    inner = _shell_string(fields)
    if inner is not None and state.depth < MAX_NESTED_SHELLS:
        # `srun ... bash -c "$LAUNCHER --node_rank \$SLURM_PROCID $CMD"`: the string is what runs
        state.depth += 1
        try:
            for sub in _statements(state, inner):
                _run(state, _Stmt(sub.chars, [stmt.lines[0]] * len(sub.chars)))
        finally:
            state.depth -= 1
        return
    if fields:
        state.commands.append(Command(tuple(fields), org))


def _shell_string(fields: list[Word]) -> str | None:
    """The STRING of `[wrapper ...] bash|sh -c STRING`, if the command runs one."""
    for i, w in enumerate(fields[:-2]):
        if w.text.rsplit("/", 1)[-1] in ("bash", "sh") and fields[i + 1].text == "-c":
            return fields[i + 2].text
    return None


_LEADING_THEN_DO = re.compile(r"\s*(?:(?:then|do)(?=[\s;]|$)\s*)+")


def _rest(stmt: _Stmt, words: list[list[_Part]]) -> tuple[str, list[int]]:
    """The statement after its first keyword (`then cmd`, `else cmd`); a run of `then`/`do` keywords goes at
    once, so a line of thousands is lexed once more, not once per keyword."""
    kw = _plain(words[0])
    m = _LEADING_THEN_DO.match(stmt.chars) if kw in ("then", "do") else None
    if m:
        return stmt.chars[m.end():], stmt.lines[m.end():]
    s = stmt.chars.lstrip()
    off = len(stmt.chars) - len(s)
    return stmt.chars[off + len(kw):], stmt.lines[off + len(kw):]


def _plain(parts: list[_Part]) -> str:
    return "".join(p.text for p in parts if p.kind == "lit" and not p.quoted) if all(
        p.kind == "lit" for p in parts) else ""


def _is_assignment(parts: list[_Part]) -> bool:
    return bool(parts) and parts[0].kind == "lit" and not parts[0].quoted and bool(_ASSIGN.match(parts[0].text))


def _assign(state: _State, stmt: _Stmt, parts: list[_Part], uncertain: str | None) -> None:
    m = _ASSIGN.match(parts[0].text)
    name, op = m.group(1), m.group(2)
    head = _Part("lit", parts[0].text[m.end():], False, parts[0].origin)
    rhs = ([head] if head.text else []) + parts[1:]
    var = state.vars.get(name)
    if rhs and rhs[0].kind == "array":
        a, b = (int(x) for x in rhs[0].arg.split(":"))
        items: list[list[_Seg]] = []
        for w in _lex(state, stmt, a, b):
            for f in _expand_parts(state, w):
                items.append([_Seg(x.text, False, x.origin, x.unresolved, x.uncertain or uncertain) for x in f])
        if op == "+=" and var is not None:
            base = var.items if var.items is not None else ([var.value] if var.value else [])
            items = [list(x) for x in base] + items
        state.vars[name] = _Var(items=items)
        return
    segs: list[_Seg] = []
    for f in _expand_parts(state, rhs, as_field=True):
        segs.extend(f)
    segs = [_Seg(x.text, False, x.origin, x.unresolved, x.uncertain or uncertain) for x in segs]
    if op == "+=" and var is not None:
        if var.items is not None:
            state.vars[name] = _Var(items=[*var.items, segs])
            return
        segs = list(var.value or []) + segs
    state.vars[name] = _Var(value=segs)


# ---------------------------------------------------------------------------------------------------
# Conditions: [[ A == B ]], [ A != B ], -z, -n, -eq..., !, joined by || and &&; anything else is unknown.


def _open_if(state: _State, kw: str, words: list[list[_Part]], org: Origin) -> None:
    cond = []
    for w in words:
        if _plain(w) == "then":
            break
        cond.append(w)
    outer = state.frames[:-1] if kw == "elif" else state.frames
    outer_off = any(frame[0] == "off" for frame in outer)
    if kw == "elif":
        if not state.frames:
            raise InputError(f"{org}: `elif` without `if`; expected a balanced if/elif/else/fi")
        frame = state.frames[-1]
        if frame[1] is True or outer_off:
            frame[0] = "off"
            return
        value = None if frame[1] is None else _condition(state, cond)
        frame[0], frame[2] = _frame_mode(value), org
        frame[1] = True if value is True else (None if value is None else frame[1])
        return
    value = None if outer_off else _condition(state, cond)
    state.frames.append([_frame_mode(value), True if value is True else (None if value is None else False), org])


def _frame_mode(value: bool | None) -> str:
    return {True: "on", False: "off", None: "uncertain"}[value]


def _else(state: _State, org: Origin) -> None:
    if not state.frames:
        raise InputError(f"{org}: `else` without `if`; expected a balanced if/elif/else/fi")
    frame = state.frames[-1]
    if frame[1] is True:
        frame[0] = "off"
    elif frame[1] is None:
        frame[0], frame[2] = "uncertain", org
    else:
        frame[0] = "on"


def _condition(state: _State, words: list[list[_Part]]) -> bool | None:
    texts: list[str | None] = []
    for w in words:
        plain = _plain(w)
        if plain in ("||", "&&", "[[", "]]", "[", "]", "!", "test"):
            texts.append(plain)
            continue
        fields = _expand_parts(state, w, as_field=True)
        f = fields[0] if fields else []
        texts.append(None if any(x.unresolved for x in f) else "".join(x.text for x in f))
    result: bool | None = None
    op = None
    group: list[str | None] = []
    for t in [*texts, "||"]:
        if t in ("||", "&&"):
            value = _test(group)
            if op is None:
                result = value
            elif op == "||":
                result = True if (result is True or value is True) else (
                    None if (result is None or value is None) else False)
            else:
                result = False if (result is False or value is False) else (
                    None if (result is None or value is None) else True)
            op, group = t, []
        else:
            group.append(t)
    return result


def _test(group: list[str | None]) -> bool | None:
    g = [t for t in group if t not in ("[[", "]]", "[", "]", "test")]
    negate = False
    while g and g[0] == "!":
        negate, g = not negate, g[1:]
    value: bool | None = None
    if len(g) == 3 and g[1] in ("==", "=", "!="):
        if g[0] is not None and g[2] is not None:
            value = (g[0] == g[2]) != (g[1] == "!=")
    elif len(g) == 3 and g[1] in ("-eq", "-ne", "-gt", "-lt", "-ge", "-le"):
        try:
            a, b = int(g[0]), int(g[2])  # type: ignore[arg-type]
            value = {"-eq": a == b, "-ne": a != b, "-gt": a > b, "-lt": a < b, "-ge": a >= b, "-le": a <= b}[g[1]]
        except (TypeError, ValueError):
            value = None
    elif len(g) == 2 and g[0] in ("-z", "-n") and g[1] is not None:
        value = (g[1] == "") == (g[0] == "-z")
    if value is None:
        return None
    return value != negate
