#!/usr/bin/python3
"""haplog: turn HAProxy HTTP log lines into tab-separated fields.

usage: haplog [--header] FILE...

One output line per HTTP request log line, with the fields
    time  frontend  backend  server  status  total_ms  bytes  method  path
(status is -1 when the client went away before a response; path without the query string).
Lines that are not request logs (health checks, server state changes, proxy start/stop) are skipped.
"""
import re
import sys

REQUEST = re.compile(
    r"haproxy\[\d+\]: (?P<client>[^ ]+) \[(?P<time>[^\]]+)\] (?P<frontend>[^ ]+) (?P<backend>[^/ ]+)/(?P<server>[^ ]+) "
    r"(?P<timers>[^ ]+) (?P<status>-?\d+) \+?(?P<bytes>\d+) [^ ]+ [^ ]+ (?P<term>[^ ]+) [^ ]+ [^ ]+ "
    r"(?:\{[^}]*\} )*\"(?P<request>[^\"]*)\""
)
FIELDS = ("time", "frontend", "backend", "server", "status", "total_ms", "bytes", "method", "path")


def parse(line):
    match = REQUEST.search(line)
    if not match:
        return None
    method, _, rest = match["request"].partition(" ")
    path = rest.rsplit(" ", 1)[0] if " HTTP/" in rest else rest
    total = match["timers"].split("/")[-1].lstrip("+")
    return (match["time"], match["frontend"], match["backend"], match["server"], match["status"], total,
            match["bytes"], method, path.split("?", 1)[0])


def main(argv):
    args = argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    if args[0] == "--header":
        print("\t".join(FIELDS))
        args = args[1:]
    for name in args:
        with open(name, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fields = parse(line)
                if fields:
                    print("\t".join(fields))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
