#!/usr/bin/env python3
"""promcheck.py — checks a Prometheus text exposition (format 0.0.4) read from stdin or a
file: every sample belongs to a family declared with exactly one HELP and one TYPE before
its samples, a family's samples are contiguous, names and label names are valid, label
values are correctly escaped, no series appears twice, values are floats, and counters
end in _total. Prints each problem and exits 1 if any (0 and a summary otherwise)."""
import re
import sys

NAME = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*$')
LABEL = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*$')
TYPES = {'counter', 'gauge', 'histogram', 'summary', 'untyped'}


# a whole well-formed label list at once (the common case, thousands of series): names,
# values with only the escapes \\ \" \n, separated by commas; anything else goes through
# the character by character parser below, which says what is wrong
PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
PAIRS = re.compile(r'(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
                   r'(?:,(?!$)|$))*')
SAMPLE = re.compile(r'([^\s{]+)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$')


def parse_labels(s, errors, ln):
    """s is the text between { and }; returns a tuple of (name, value) or None."""
    if PAIRS.fullmatch(s) and not s.startswith('__') and ',__' not in s:
        out = PAIR.findall(s)
        if len(out) < 2 or len({n for n, _ in out}) == len(out):
            return tuple(out)
    out, i = [], 0
    while i < len(s):
        m = re.match(r'([a-zA-Z_][a-zA-Z0-9_]*)="', s[i:])
        if not m:
            errors.append(f'line {ln}: bad label syntax at {s[i:]!r}')
            return None
        name = m.group(1)
        i += m.end()
        val = []
        while True:
            if i >= len(s):
                errors.append(f'line {ln}: unterminated label value')
                return None
            c = s[i]
            if c == '\\':
                if i + 1 >= len(s) or s[i + 1] not in '\\"n':
                    errors.append(f'line {ln}: bad escape in label value')
                    return None
                val.append(s[i:i + 2])
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == '\n':
                errors.append(f'line {ln}: newline in label value')
                return None
            else:
                val.append(c)
                i += 1
        if name.startswith('__'):
            errors.append(f'line {ln}: reserved label name {name}')
        if any(n == name for n, _ in out):
            errors.append(f'line {ln}: duplicate label {name}')
        out.append((name, ''.join(val)))
        if i < len(s):
            if s[i] != ',':
                errors.append(f'line {ln}: expected , between labels')
                return None
            i += 1
    return tuple(out)


def family_of(name, types):
    if name in types:
        return name
    for suf in ('_bucket', '_sum', '_count'):
        if name.endswith(suf) and types.get(name[:-len(suf)]) in ('histogram', 'summary'):
            return name[:-len(suf)]
    return name


def check(text):
    errors, helps, types, seen, done = [], {}, {}, set(), set()
    current, samples = None, 0
    if text and not text.endswith('\n'):
        errors.append('exposition does not end with a newline')
    for ln, line in enumerate(text.split('\n'), 1):
        if not line:
            continue
        if line.startswith('#'):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ('HELP', 'TYPE'):
                name = parts[2]
                if not NAME.match(name):
                    errors.append(f'line {ln}: bad metric name {name!r}')
                if name in done:
                    errors.append(f'line {ln}: family {name} reopened after other families')
                table = helps if parts[1] == 'HELP' else types
                if name in table:
                    errors.append(f'line {ln}: second {parts[1]} for {name}')
                if parts[1] == 'TYPE':
                    t = parts[3].strip() if len(parts) > 3 else ''
                    if t not in TYPES:
                        errors.append(f'line {ln}: bad type {t!r}')
                    if t == 'counter' and not name.endswith('_total'):
                        errors.append(f'line {ln}: counter {name} does not end in _total')
                    table[name] = t
                else:
                    table[name] = parts[3] if len(parts) > 3 else ''
                if current != name and current is not None:
                    done.add(current)
                current = name
            continue
        m = SAMPLE.match(line)
        if not m:
            errors.append(f'line {ln}: not a sample: {line!r}')
            continue
        name, labels, value = m.group(1), m.group(3), m.group(4)
        if not NAME.match(name):
            errors.append(f'line {ln}: bad metric name {name!r}')
        fam = family_of(name, types)
        if fam not in helps or fam not in types:
            errors.append(f'line {ln}: {name} has no HELP and TYPE before it')
        if fam != current:
            errors.append(f'line {ln}: sample of {fam} outside its family block')
        lab = parse_labels(labels, errors, ln) if labels else ()
        if lab is not None:
            key = (name, tuple(sorted(lab)))
            if key in seen:
                errors.append(f'line {ln}: duplicate series {name}{labels or ""}')
            seen.add(key)
        try:
            float(value)
        except ValueError:
            if value not in ('NaN', '+Inf', '-Inf'):
                errors.append(f'line {ln}: bad value {value!r}')
        samples += 1
    for name in types:
        if name not in helps:
            errors.append(f'family {name} has TYPE but no HELP')
    return errors, samples, len(types)


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    errors, samples, families = check(text)
    for e in errors[:50]:
        print(e)
    if errors:
        print(f'{len(errors)} problem(s)')
        return 1
    print(f'ok: {families} families, {samples} samples')
    return 0


if __name__ == '__main__':
    sys.exit(main())
