#!/usr/bin/python3
"""html2md: one page of a Confluence HTML space export as Markdown.

Usage: html2md PAGE.html > PAGE.md

The page title (without the "SPACE : " prefix) becomes the # heading, and only div#main-content is converted:
breadcrumbs, attachments and the footer are export chrome. Headings move one level down, links to other pages
of the export (x.html) become links to x.md, images and tables are left out.
"""
import sys
from html.parser import HTMLParser


class Converter(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.title = None
        self.in_title = False
        self.depth = 0  # div nesting within main-content; 0 = outside it
        self.lists = []
        self.href = None
        self.lines = []
        self.prefix = ""  # heading marks or list indentation and bullet of the line being built
        self.line = ""

    def flush(self, blank=False):
        text = " ".join(self.line.split())
        if text:
            self.lines.append(self.prefix + text)
        self.prefix = self.line = ""
        if blank and self.lines and self.lines[-1] != "":
            self.lines.append("")

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "title":
            self.in_title = True
            self.title = ""
        elif tag == "div" and (self.depth or attrs.get("id") == "main-content"):
            self.depth += 1
        elif not self.depth:
            return
        elif tag in ("h1", "h2", "h3", "h4"):
            self.flush(blank=True)
            self.prefix = "#" * (int(tag[1]) + 1) + " "
        elif tag in ("ul", "ol"):
            self.flush(blank=not self.lists)
            self.lists.append(tag)
        elif tag == "li":
            self.flush()
            self.prefix = "  " * (len(self.lists) - 1) + ("- " if self.lists[-1] == "ul" else "1. ")
        elif tag == "p":
            self.flush(blank=not self.lists)
        elif tag == "br":
            self.flush()
        elif tag in ("strong", "b"):
            self.line += "**"
        elif tag in ("em", "i"):
            self.line += "_"
        elif tag == "code":
            self.line += "`"
        elif tag == "a":
            href = attrs.get("href", "")
            if href.endswith(".html") and "/" not in href and ":" not in href:
                href = href[: -len(".html")] + ".md"
            self.href = href
            self.line += "["

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
        elif not self.depth:
            return
        elif tag == "div":
            self.depth -= 1
        elif tag in ("h1", "h2", "h3", "h4", "p"):
            self.flush(blank=not self.lists)
        elif tag == "li":
            self.flush()
        elif tag in ("ul", "ol"):
            self.flush()
            self.lists.pop()
            if not self.lists:
                self.flush(blank=True)
        elif tag in ("strong", "b"):
            self.line += "**"
        elif tag in ("em", "i"):
            self.line += "_"
        elif tag == "code":
            self.line += "`"
        elif tag == "a" and self.href is not None:
            self.line += f"]({self.href})"
            self.href = None

    def handle_data(self, data):
        if self.in_title:
            self.title += data
        elif self.depth:
            self.line += data

    def markdown(self):
        self.flush()
        while self.lines and self.lines[-1] == "":
            self.lines.pop()
        title = " ".join((self.title or "").split())
        if " : " in title:
            title = title.split(" : ", 1)[1]
        return "\n".join([f"# {title}", ""] + self.lines) + "\n"


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: html2md PAGE.html > PAGE.md")
    with open(argv[1], encoding="utf-8") as page:
        converter = Converter()
        converter.feed(page.read())
        converter.close()
    sys.stdout.write(converter.markdown())


if __name__ == "__main__":
    main(sys.argv)
