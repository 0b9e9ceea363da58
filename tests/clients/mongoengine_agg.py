"""MongoEngine's aggregation helpers against a running Cairn server.

    python mongoengine_agg.py mongodb://127.0.0.1:PORT/

`QuerySet.count()` (PyMongo's count_documents, an aggregate), `QuerySet.aggregate()` and
`sum()`/`average()` (aggregate $group pipelines), checked on data and types.
`item_frequencies()` runs the `mapReduce` command (or server-side JavaScript), which Cairn
does not have: it is reported as a `# note:` line, not counted. Prints `ok`/`FAIL` lines and a
summary; started by tests/clients/run.sh.
"""

from __future__ import annotations

import sys
import traceback

import mongoengine as me

URI = sys.argv[1] if len(sys.argv) > 1 else "mongodb://127.0.0.1:27017/"
passed = failed = 0


def check(name):
    def run(fn):
        global passed, failed
        try:
            fn()
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAIL - {name}\n" + traceback.format_exc().rstrip())
        else:
            passed += 1
            print(f"ok   - {name}")
        return fn

    return run


me.connect(host=URI.rstrip("/") + "/cairn_mongoengine", serverSelectionTimeoutMS=10_000)


class Post(me.Document):
    title = me.StringField(required=True)
    author = me.StringField()
    tags = me.ListField(me.StringField())
    likes = me.IntField(default=0)
    meta = {"collection": "posts"}


Post.drop_collection()
Post(title="a", author="ann", tags=["db", "rust"], likes=3).save()
Post(title="b", author="bob", tags=["db"], likes=5).save()
Post(title="c", author="ann", tags=["rust", "wasm", "db"], likes=0).save()


@check("MongoEngine: QuerySet.count() (count_documents)")
def _():
    assert Post.objects.count() == 3, Post.objects.count()
    assert Post.objects(author="ann").count() == 2
    assert Post.objects(likes__gt=10).count() == 0
    assert Post.objects(author="ann").limit(1).count(with_limit_and_skip=True) == 1


@check("MongoEngine: QuerySet.aggregate() with $match/$group/$sort")
def _():
    got = list(Post.objects(likes__gte=0).aggregate([
        {"$group": {"_id": "$author", "likes": {"$sum": "$likes"}, "n": {"$sum": 1}}},
        {"$sort": {"_id": 1}},
    ]))
    assert got == [{"_id": "ann", "likes": 3, "n": 2}, {"_id": "bob", "likes": 5, "n": 1}], got


@check("MongoEngine: the $unwind/$group pipeline item_frequencies stands for")
def _():
    got = {d["_id"]: d["n"] for d in Post.objects.aggregate([
        {"$unwind": "$tags"}, {"$group": {"_id": "$tags", "n": {"$sum": 1}}}])}
    assert got == {"db": 3, "rust": 2, "wasm": 1}, got


try:
    Post.objects.item_frequencies("tags")
    print("# note: item_frequencies() now works; count it as a check")
except me.errors.OperationError as e:
    print(f"# note: item_frequencies() needs mapReduce or server-side JavaScript: {e}")
except Exception as e:  # noqa: BLE001 - PyMongo's OperationFailure
    print(f"# note: item_frequencies() needs mapReduce or server-side JavaScript: {e}")


@check("MongoEngine: sum() and average()")
def _():
    assert Post.objects.sum("likes") == 8, Post.objects.sum("likes")
    avg = Post.objects.average("likes")
    assert abs(avg - 8 / 3) < 1e-9, avg


print(f"mongoengine: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
