"""Every YAML file under deploy/ parses."""

import yaml

from .common import DEPLOY, Collector, rel, load_all


def check_yaml():
    c = Collector()
    files = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yml", ".yaml") and p.is_file())
    documents = 0
    for path in files:
        try:
            docs = load_all(path)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f"{rel(path)}:{mark.line + 1}:{mark.column + 1}" if mark else rel(path)
            c.expect(False, f"{where}: {getattr(error, 'problem', None) or error}")
            continue
        c.expect(docs, f"{rel(path)}: no YAML document in it")
        documents += len(docs)
    c.expect(files, "no YAML files under deploy/")
    return c.done(f"{len(files)} files, {documents} documents parse")
