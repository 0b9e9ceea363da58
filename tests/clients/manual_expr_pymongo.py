"""The MongoDB 7.0 manual's aggregation-expression examples, run through PyMongo.

    python manual_expr_pymongo.py mongodb://127.0.0.1:PORT/

Each example inserts the page's sample documents into a fresh collection and evaluates the
page's expressions as computed fields of a `find` projection (`{"_id": 0, "r": <expr>}`),
which runs the same expression evaluator as `$project`, then compares the result with the
output the page documents as BSON bytes (field order and the int32/int64/double/decimal types
count). Error cases use the codes MongoDB documents or raises. Pages covered: the date
operators ($dateToString $dateFromString $dateToParts $dateFromParts $dateAdd $dateSubtract
$dateDiff $dateTrunc $year ... $isoDayOfWeek), set operators, $regexFind $regexFindAll
$regexMatch, $getField $setField $unsetField, $sortArray, $zip, $trim $ltrim $rtrim,
$replaceOne $replaceAll, $indexOfBytes $indexOfCP, $objectToArray $arrayToObject
$mergeObjects, $bitAnd $bitOr $bitXor $bitNot, $round $trunc, trigonometry, $exp $ln $log
$log10 $pow $sqrt with Decimal128, $bsonSize $binarySize, $tsSecond $tsIncrement,
$toHashedIndexKey, $rand, $literal, $function, $$CLUSTER_TIME and $$NOW.

Where the manual's example uses an aggregation stage other than $project (e.g. $group), the
example keeps the page's data and expression and checks the per-document values the page's
prose states. Output: one `ok   - ...` line per example, `FAIL - ...` otherwise, then
`manual-expr: N passed, M failed`. Started by tests/clients/run.sh.
"""

from __future__ import annotations

import datetime
import math
import sys
import traceback

import bson
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.regex import Regex
from bson.son import SON
from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import OperationFailure

URI = sys.argv[1] if len(sys.argv) > 1 else "mongodb://127.0.0.1:27017/"
DB_NAME = "cairn_manual_expr"

client = MongoClient(URI, serverSelectionTimeoutMS=10_000, tz_aware=False)
client.drop_database(DB_NAME)
db = client[DB_NAME]

passed = 0
failed = 0
LAST = ["(no request yet)"]


class Deviation(Exception):
    """The server's answer differs from the manual's."""


def example(name: str):
    """Runs the decorated function at once as one example."""

    def run(fn):
        global passed, failed
        try:
            fn()
        except Deviation as d:
            failed += 1
            print(f"FAIL - {name}: {d}")
        except OperationFailure as e:
            failed += 1
            details = e.details or {}
            print(
                f"FAIL - {name}: {LAST[0]}\n    got error {e.code} ({details.get('codeName')}): "
                f"{details.get('errmsg', str(e))}"
            )
        except Exception:  # noqa: BLE001 - a bug in this script or in the driver
            failed += 1
            print(f"FAIL - {name}: exception\n" + traceback.format_exc().rstrip())
        else:
            passed += 1
            print(f"ok   - {name}")
        return fn

    return run


def fresh(name: str, docs: list[dict]):
    coll = db[name]
    coll.drop()
    if docs:
        coll.insert_many([dict(d) for d in docs])
    return coll


def computed(coll, fields: dict, filt: dict | None = None) -> list[dict]:
    """db.coll.find(filt, {_id: 0, <fields>}) in _id order."""
    proj = SON([("_id", 0)] + list(fields.items()))
    LAST[0] = f"db.{coll.name}.find({filt or {}!r}, {dict(proj)!r})"
    return list(coll.find(filt or {}, proj, sort=[("_id", 1)]))


def same(actual, expected) -> None:
    """Byte-for-byte BSON equality of two lists of documents."""
    if [bson.encode(a) for a in actual] != [bson.encode(e) for e in expected]:
        raise Deviation(f"{LAST[0]}\n    got:    {actual!r}\n    manual: {expected!r}")


def expect_error(code: int, coll, expr) -> None:
    LAST[0] = f"db.{coll.name}.find({{}}, {{r: {expr!r}}})"
    try:
        list(coll.find({}, {"_id": 0, "r": expr}))
    except OperationFailure as e:
        if e.code != code:
            raise Deviation(f"{LAST[0]}\n    got error {e.code}: {e.details}\n    MongoDB: error {code}") from None
        return
    raise Deviation(f"{LAST[0]}\n    got: success\n    MongoDB: error {code}")


def D(s: str) -> datetime.datetime:
    """An ISODate (UTC)."""
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).replace(tzinfo=None)


def dec(s: str) -> Decimal128:
    return Decimal128(s)


# ==============================================================================================
# Dates
# ==============================================================================================

SALES = [{"_id": 1, "item": "abc", "price": 10, "quantity": 2, "date": D("2014-01-01T08:15:39.736Z")}]


@example("$dateToString: formats, Olson zone and UTC offset")
def _():
    coll = fresh("x_date_to_string", SALES)
    same(
        computed(
            coll,
            SON(
                [
                    ("yearMonthDayUTC", {"$dateToString": {"format": "%Y-%m-%d", "date": "$date"}}),
                    ("timewithOffsetNY", {"$dateToString": {"format": "%H:%M:%S:%L%z", "date": "$date", "timezone": "America/New_York"}}),
                    ("timewithOffset430", {"$dateToString": {"format": "%H:%M:%S:%L%z", "date": "$date", "timezone": "+04:30"}}),
                    ("minutesOffsetNY", {"$dateToString": {"format": "%Z", "date": "$date", "timezone": "America/New_York"}}),
                    ("minutesOffset430", {"$dateToString": {"format": "%Z", "date": "$date", "timezone": "+04:30"}}),
                    ("abbreviated_month", {"$dateToString": {"format": "%b", "date": "$date", "timezone": "+04:30"}}),
                    ("full_month", {"$dateToString": {"format": "%B", "date": "$date", "timezone": "+04:30"}}),
                ]
            ),
        ),
        [
            SON(
                [
                    ("yearMonthDayUTC", "2014-01-01"),
                    ("timewithOffsetNY", "03:15:39:736-0500"),
                    ("timewithOffset430", "12:45:39:736+0430"),
                    ("minutesOffsetNY", "-300"),
                    ("minutesOffset430", "270"),
                    ("abbreviated_month", "Jan"),
                    ("full_month", "January"),
                ]
            )
        ],
    )
    expect_error(18536, coll, {"$dateToString": {"format": "%q", "date": "$date"}})
    expect_error(40485, coll, {"$dateToString": {"date": "$date", "timezone": "Mars/Olympus"}})


@example("$year ... $isoDayOfWeek: date parts of 2014-01-01T08:15:39.736Z")
def _():
    coll = fresh("x_date_parts", SALES)
    fields = SON(
        [
            ("year", {"$year": "$date"}),
            ("month", {"$month": "$date"}),
            ("day", {"$dayOfMonth": "$date"}),
            ("hour", {"$hour": "$date"}),
            ("minutes", {"$minute": "$date"}),
            ("seconds", {"$second": "$date"}),
            ("milliseconds", {"$millisecond": "$date"}),
            ("dayOfYear", {"$dayOfYear": "$date"}),
            ("dayOfWeek", {"$dayOfWeek": "$date"}),
            ("week", {"$week": "$date"}),
            ("isoWeek", {"$isoWeek": "$date"}),
            ("isoWeekYear", {"$isoWeekYear": "$date"}),
            ("isoDayOfWeek", {"$isoDayOfWeek": "$date"}),
            ("hourNY", {"$hour": {"date": "$date", "timezone": "America/New_York"}}),
        ]
    )
    same(
        computed(coll, fields),
        [
            SON(
                [
                    ("year", 2014),
                    ("month", 1),
                    ("day", 1),
                    ("hour", 8),
                    ("minutes", 15),
                    ("seconds", 39),
                    ("milliseconds", 736),
                    ("dayOfYear", 1),
                    ("dayOfWeek", 4),
                    ("week", 0),
                    ("isoWeek", 1),
                    ("isoWeekYear", Int64(2014)),
                    ("isoDayOfWeek", 3),
                    ("hourNY", 3),
                ]
            )
        ],
    )


@example("$dateToParts: UTC, iso8601 and America/New_York")
def _():
    coll = fresh("x_date_to_parts", [{"_id": 2, "item": "abc", "price": 10, "quantity": 2, "date": D("2017-01-01T01:29:09.123Z")}])
    same(
        computed(
            coll,
            SON(
                [
                    ("date", {"$dateToParts": {"date": "$date"}}),
                    ("date_iso", {"$dateToParts": {"date": "$date", "iso8601": True}}),
                    ("date_timezone", {"$dateToParts": {"date": "$date", "timezone": "America/New_York"}}),
                ]
            ),
        ),
        [
            SON(
                [
                    ("date", SON([("year", 2017), ("month", 1), ("day", 1), ("hour", 1), ("minute", 29), ("second", 9), ("millisecond", 123)])),
                    ("date_iso", SON([("isoWeekYear", 2016), ("isoWeek", 52), ("isoDayOfWeek", 7), ("hour", 1), ("minute", 29), ("second", 9), ("millisecond", 123)])),
                    ("date_timezone", SON([("year", 2016), ("month", 12), ("day", 31), ("hour", 20), ("minute", 29), ("second", 9), ("millisecond", 123)])),
                ]
            )
        ],
    )


@example("$dateFromParts: calendar, ISO week and time zone forms; carrying out-of-range values")
def _():
    coll = fresh("x_date_from_parts", [{"_id": 1}])
    same(
        computed(
            coll,
            SON(
                [
                    ("date", {"$dateFromParts": {"year": 2017, "month": 2, "day": 8, "hour": 12}}),
                    ("date_iso", {"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 6, "isoDayOfWeek": 3, "hour": 12}}),
                    ("date_timezone", {"$dateFromParts": {"year": 2016, "month": 12, "day": 31, "hour": 23, "minute": 46, "second": 12, "timezone": "America/New_York"}}),
                    ("month14", {"$dateFromParts": {"year": 2017, "month": 14, "day": 1, "hour": 12}}),
                    ("month0", {"$dateFromParts": {"year": 2017, "month": 0, "day": 1, "hour": 12}}),
                ]
            ),
        ),
        [
            SON(
                [
                    ("date", D("2017-02-08T12:00:00Z")),
                    ("date_iso", D("2017-02-08T12:00:00Z")),
                    ("date_timezone", D("2017-01-01T04:46:12Z")),
                    ("month14", D("2018-02-01T12:00:00Z")),
                    ("month0", D("2016-12-01T12:00:00Z")),
                ]
            )
        ],
    )
    expect_error(40489, coll, {"$dateFromParts": {"year": 2017, "isoWeek": 6}})


LOGMESSAGES = [
    {"_id": 1, "date": "2017-02-08T12:10:40.787", "timezone": "America/New_York", "message": "Step 1: Started"},
    {"_id": 2, "date": "2017-02-08", "timezone": "-05:00", "message": "Step 1: Ended"},
    {"_id": 3, "message": " Step 1: Ended "},
    {"_id": 4, "date": "2017-02-09", "timezone": "Europe/London", "message": "Step 2: Started"},
    {"_id": 5, "date": "2017-02-09T03:35:02.055", "timezone": "+0530", "message": "Step 2: In Progress"},
]


@example("$dateFromString: converting dates with a fixed and a per-document timezone")
def _():
    coll = fresh("x_date_from_string", LOGMESSAGES)
    same(
        computed(coll, {"date": {"$dateFromString": {"dateString": "$date", "timezone": "America/New_York"}}}),
        [
            {"date": D("2017-02-08T17:10:40.787Z")},
            {"date": D("2017-02-08T05:00:00Z")},
            {"date": None},
            {"date": D("2017-02-09T05:00:00Z")},
            {"date": D("2017-02-09T08:35:02.055Z")},
        ],
    )
    same(
        computed(coll, {"date": {"$dateFromString": {"dateString": "$date", "timezone": "$timezone"}}}),
        [
            {"date": D("2017-02-08T17:10:40.787Z")},
            {"date": D("2017-02-08T05:00:00Z")},
            {"date": None},
            {"date": D("2017-02-09T00:00:00Z")},
            {"date": D("2017-02-08T22:05:02.055Z")},
        ],
    )


@example("$dateFromString: onError, onNull and format")
def _():
    coll = fresh(
        "x_date_from_string_err",
        [
            {"_id": 1, "date": "2017-02-08T12:10:40.787", "timezone": "America/New_York"},
            {"_id": 2, "date": "20177-02-09T03:35:02.055", "timezone": "America/New_York"},
        ],
    )
    same(
        computed(coll, {"date": {"$dateFromString": {"dateString": "$date", "timezone": "$timezone", "onError": "$date"}}}),
        [{"date": D("2017-02-08T17:10:40.787Z")}, {"date": "20177-02-09T03:35:02.055"}],
    )
    expect_error(241, coll, {"$dateFromString": {"dateString": "$date", "timezone": "$timezone"}})
    coll = fresh("x_date_from_string_null", [{"_id": 1, "date": "2017-02-08T12:10:40.787", "timezone": "America/New_York"}, {"_id": 2, "date": None, "timezone": "America/New_York"}])
    same(
        computed(coll, {"date": {"$dateFromString": {"dateString": "$date", "timezone": "$timezone", "onNull": datetime.datetime(1970, 1, 1)}}}),
        [{"date": D("2017-02-08T17:10:40.787Z")}, {"date": D("1970-01-01T00:00:00Z")}],
    )
    same(
        computed(
            coll,
            SON(
                [
                    ("us", {"$dateFromString": {"dateString": "06-15-2018", "format": "%m-%d-%Y"}}),
                    ("eu", {"$dateFromString": {"dateString": "15-06-2018", "format": "%d-%m-%Y"}}),
                ]
            ),
            {"_id": 1},
        ),
        [SON([("us", D("2018-06-15T00:00:00Z")), ("eu", D("2018-06-15T00:00:00Z"))])],
    )


SHIPPING = [
    {"_id": 1, "custId": 456, "purchaseDate": D("2020-12-31T00:00:00Z"), "deliveryDate": D("2021-01-05T00:00:00Z")},
    {"_id": 2, "custId": 457, "purchaseDate": D("2021-02-28T00:00:00Z"), "deliveryDate": D("2021-03-07T00:00:00Z")},
    {"_id": 3, "custId": 458, "purchaseDate": D("2021-02-16T00:00:00Z"), "deliveryDate": D("2021-02-18T00:00:00Z")},
]


@example("$dateAdd / $dateSubtract: expected delivery dates, month ends, DST")
def _():
    coll = fresh("x_date_add", SHIPPING)
    same(
        computed(coll, {"expectedDeliveryDate": {"$dateAdd": {"startDate": "$purchaseDate", "unit": "day", "amount": 3}}}),
        [
            {"expectedDeliveryDate": D("2021-01-03T00:00:00Z")},
            {"expectedDeliveryDate": D("2021-03-03T00:00:00Z")},
            {"expectedDeliveryDate": D("2021-02-19T00:00:00Z")},
        ],
    )
    same(
        computed(coll, {"r": {"$dateSubtract": {"startDate": "$deliveryDate", "unit": "month", "amount": 1}}}),
        [{"r": D("2020-12-05T00:00:00Z")}, {"r": D("2021-02-07T00:00:00Z")}, {"r": D("2021-01-18T00:00:00Z")}],
    )
    coll = fresh("x_date_add_dst", [{"_id": 1, "start": D("2021-03-13T15:00:00Z")}])
    same(
        computed(
            coll,
            SON(
                [
                    ("day", {"$dateAdd": {"startDate": "$start", "unit": "day", "amount": 1, "timezone": "America/New_York"}}),
                    ("hours", {"$dateAdd": {"startDate": "$start", "unit": "hour", "amount": 24, "timezone": "America/New_York"}}),
                ]
            ),
        ),
        [SON([("day", D("2021-03-14T14:00:00Z")), ("hours", D("2021-03-14T15:00:00Z"))])],
    )
    expect_error(5166405, coll, {"$dateAdd": {"startDate": "$start", "unit": "day", "amount": 1.5}})


@example("$dateDiff: result precision by unit")
def _():
    coll = fresh(
        "x_date_diff",
        [
            {"_id": 1, "custId": 456, "start": D("2010-01-01T00:00:00Z"), "end": D("2011-01-01T00:00:00Z")},
            {"_id": 2, "custId": 457, "start": D("2010-01-01T00:00:00Z"), "end": D("2011-07-01T00:00:00Z")},
            {"_id": 3, "custId": 458, "start": D("2010-03-01T00:00:00Z"), "end": D("2010-04-30T00:00:00Z")},
        ],
    )
    fields = SON(
        [
            ("years", {"$dateDiff": {"startDate": "$start", "endDate": "$end", "unit": "year"}}),
            ("months", {"$dateDiff": {"startDate": "$start", "endDate": "$end", "unit": "month"}}),
            ("days", {"$dateDiff": {"startDate": "$start", "endDate": "$end", "unit": "day"}}),
        ]
    )
    same(
        computed(coll, fields),
        [
            SON([("years", Int64(1)), ("months", Int64(12)), ("days", Int64(365))]),
            SON([("years", Int64(1)), ("months", Int64(18)), ("days", Int64(546))]),
            SON([("years", Int64(0)), ("months", Int64(1)), ("days", Int64(60))]),
        ],
    )


@example("$dateDiff: weeks per month with startOfWeek")
def _():
    coll = fresh(
        "x_date_diff_weeks",
        [
            {"_id": 1, "month": "January", "start": D("2021-01-01T00:00:00Z"), "end": D("2021-01-31T00:00:00Z")},
            {"_id": 2, "month": "February", "start": D("2021-02-01T00:00:00Z"), "end": D("2021-02-28T00:00:00Z")},
            {"_id": 3, "month": "March", "start": D("2021-03-01T00:00:00Z"), "end": D("2021-03-31T00:00:00Z")},
        ],
    )
    fields = SON(
        [
            ("wks_default", {"$dateDiff": {"startDate": "$start", "endDate": "$end", "unit": "week"}}),
            ("wks_monday", {"$dateDiff": {"startDate": "$start", "endDate": "$end", "unit": "week", "startOfWeek": "Monday"}}),
            ("wks_friday", {"$dateDiff": {"startDate": "$start", "endDate": "$end", "unit": "week", "startOfWeek": "fri"}}),
        ]
    )
    same(
        computed(coll, fields),
        [
            SON([("wks_default", Int64(5)), ("wks_monday", Int64(4)), ("wks_friday", Int64(4))]),
            SON([("wks_default", Int64(4)), ("wks_monday", Int64(3)), ("wks_friday", Int64(4))]),
            SON([("wks_default", Int64(4)), ("wks_monday", Int64(4)), ("wks_friday", Int64(4))]),
        ],
    )


@example("$dateTrunc: week bins in America/Los_Angeles, months, years")
def _():
    coll = fresh("x_date_trunc", [{"_id": 0, "type": "chocolate", "orderDate": D("2020-05-18T14:10:30Z"), "quantity": 110}])
    same(
        computed(
            coll,
            SON(
                [
                    ("truncatedOrderDate", {"$dateTrunc": {"date": "$orderDate", "unit": "week", "binSize": 2, "timezone": "America/Los_Angeles", "startOfWeek": "Monday"}}),
                    ("month", {"$dateTrunc": {"date": "$orderDate", "unit": "month"}}),
                    ("hours6", {"$dateTrunc": {"date": "$orderDate", "unit": "hour", "binSize": 6}}),
                ]
            ),
        ),
        [SON([("truncatedOrderDate", D("2020-05-11T07:00:00Z")), ("month", D("2020-05-01T00:00:00Z")), ("hours6", D("2020-05-18T12:00:00Z"))])],
    )


# ==============================================================================================
# Sets, arrays, objects
# ==============================================================================================

FLOWERS = [
    {"_id": 1, "flowerFieldA": ["rose", "orchid"], "flowerFieldB": ["rose", "orchid"]},
    {"_id": 2, "flowerFieldA": ["rose", "orchid"], "flowerFieldB": ["orchid", "rose", "orchid"]},
    {"_id": 3, "flowerFieldA": ["rose", "orchid"], "flowerFieldB": ["rose", "orchid", "jasmine"]},
    {"_id": 4, "flowerFieldA": ["rose", "orchid"], "flowerFieldB": ["jasmine", "rose"]},
    {"_id": 5, "flowerFieldA": ["rose", "orchid"], "flowerFieldB": []},
    {"_id": 6, "flowerFieldA": ["rose", "orchid"], "flowerFieldB": [["rose"], ["orchid"]]},
    {"_id": 7, "flowerFieldA": ["rose", "orchid"], "flowerFieldB": [["rose", "orchid"]]},
    {"_id": 8, "flowerFieldA": [], "flowerFieldB": []},
    {"_id": 9, "flowerFieldA": [], "flowerFieldB": ["rose"]},
]


@example("$setEquals / $setIsSubset: the flowers collection")
def _():
    coll = fresh("x_sets", FLOWERS)
    eq = [True, True, False, False, False, False, False, True, False]
    sub = [True, True, True, False, False, False, False, True, True]
    same(
        computed(coll, SON([("sameFlowers", {"$setEquals": ["$flowerFieldA", "$flowerFieldB"]}), ("AisSubset", {"$setIsSubset": ["$flowerFieldA", "$flowerFieldB"]})])),
        [SON([("sameFlowers", e), ("AisSubset", s)]) for e, s in zip(eq, sub)],
    )


@example("$setDifference / $setIntersection / $setUnion (compared as sets)")
def _():
    coll = fresh("x_sets2", FLOWERS[:5])
    out = computed(
        coll,
        SON(
            [
                ("inBOnly", {"$setDifference": ["$flowerFieldB", "$flowerFieldA"]}),
                ("common", {"$setIntersection": ["$flowerFieldA", "$flowerFieldB"]}),
                ("all", {"$setUnion": ["$flowerFieldA", "$flowerFieldB"]}),
            ]
        ),
    )
    want = [
        ([], ["orchid", "rose"], ["orchid", "rose"]),
        ([], ["orchid", "rose"], ["orchid", "rose"]),
        (["jasmine"], ["orchid", "rose"], ["jasmine", "orchid", "rose"]),
        (["jasmine"], ["rose"], ["jasmine", "orchid", "rose"]),
        ([], [], ["orchid", "rose"]),
    ]
    got = [(sorted(d["inBOnly"]), sorted(d["common"]), sorted(d["all"])) for d in out]
    if got != want:
        raise Deviation(f"{LAST[0]}\n    got:    {got!r}\n    manual: {want!r}")


@example("$sortArray: by field, descending, whole values")
def _():
    team = [
        {"name": "pat", "age": 30, "address": {"street": "12 Baker St", "city": "London"}},
        {"name": "dallas", "age": 36, "address": {"street": "12 Cowper St", "city": "Palo Alto"}},
        {"name": "charlie", "age": 42, "address": {"street": "12 French St", "city": "New Brunswick"}},
    ]
    coll = fresh("x_sort_array", [{"_id": 1, "team": team}])
    same(
        computed(coll, {"result": {"$sortArray": {"input": "$team", "sortBy": {"name": 1}}}}),
        [{"result": [team[2], team[1], team[0]]}],
    )
    same(
        computed(coll, {"result": {"$sortArray": {"input": "$team", "sortBy": {"address.city": -1}}}}),
        [{"result": [team[1], team[2], team[0]]}],
    )
    same(
        computed(coll, {"result": {"$sortArray": {"input": [1, 4, 1, 6, 12, 5], "sortBy": 1}}}),
        [{"result": [1, 1, 4, 5, 6, 12]}],
    )
    same(
        computed(coll, {"result": {"$sortArray": {"input": [20, 4, {"a": "Free"}, 6, 21, 5, "Gratis", {"a": None}, {"a": {"sale": True, "price": 19}}, Decimal128("10.23"), {"a": "On sale"}], "sortBy": 1}}}),
        [{"result": [4, 5, 6, Decimal128("10.23"), 20, 21, "Gratis", {"a": None}, {"a": "Free"}, {"a": "On sale"}, {"a": {"sale": True, "price": 19}}]}],
    )


@example("$zip: matrix transposition, longest length with defaults")
def _():
    coll = fresh("x_zip", [{"_id": 1, "matrix": [[1, 2], [2, 3], [3, 4]]}, {"_id": 2, "matrix": [[8, 7], [7, 6], [5, 4]]}])
    same(
        computed(
            coll,
            {"transposed": {"$zip": {"inputs": [{"$arrayElemAt": ["$matrix", 0]}, {"$arrayElemAt": ["$matrix", 1]}, {"$arrayElemAt": ["$matrix", 2]}]}}},
        ),
        [{"transposed": [[1, 2, 3], [2, 3, 4]]}, {"transposed": [[8, 7, 5], [7, 6, 4]]}],
    )
    same(
        computed(coll, {"r": {"$zip": {"inputs": [["a"], ["b", "c"]], "useLongestLength": True, "defaults": ["a", "b"]}}}, {"_id": 1}),
        [{"r": [["a", "b"], ["a", "c"]]}],
    )


@example("$objectToArray / $arrayToObject / $mergeObjects")
def _():
    coll = fresh("x_objects", [{"_id": 1, "item": "ABC1", "dimensions": {"l": 25, "w": 10, "uom": "cm"}}])
    same(
        computed(coll, {"dimensions": {"$objectToArray": "$dimensions"}}),
        [{"dimensions": [{"k": "l", "v": 25}, {"k": "w", "v": 10}, {"k": "uom", "v": "cm"}]}],
    )
    same(
        computed(
            coll,
            SON(
                [
                    ("pairs", {"$arrayToObject": {"$literal": [["item", "abc123"], ["qty", 25]]}}),
                    ("kv", {"$arrayToObject": {"$literal": [{"k": "item", "v": "abc123"}, {"k": "qty", "v": 25}]}}),
                    ("dup", {"$arrayToObject": {"$literal": [["qty", 25], ["qty", 50]]}}),
                    ("merged", {"$mergeObjects": [{"a": 1}, None, {"a": 2, "b": 3}]}),
                ]
            ),
        ),
        [SON([("pairs", SON([("item", "abc123"), ("qty", 25)])), ("kv", SON([("item", "abc123"), ("qty", 25)])), ("dup", {"qty": 50}), ("merged", SON([("a", 2), ("b", 3)]))])],
    )
    expect_error(40400, coll, {"$mergeObjects": ["$item"]})


@example("$getField / $setField / $unsetField: dotted and $-prefixed field names")
def _():
    coll = fresh("x_fields", [{"_id": 1, "item": "sweatshirt", "price.usd": 45.99, "$price": 11, "qty": 300}])
    same(
        computed(
            coll,
            SON(
                [
                    ("usd", {"$getField": "price.usd"}),
                    ("dollar", {"$getField": {"$literal": "$price"}}),
                ]
            ),
        ),
        [SON([("usd", 45.99), ("dollar", 11)])],
    )
    same(
        computed(coll, {"doc": {"$setField": {"field": "price.usd", "input": "$$ROOT", "value": 49.99}}}),
        [{"doc": SON([("_id", 1), ("item", "sweatshirt"), ("price.usd", 49.99), ("$price", 11), ("qty", 300)])}],
    )
    same(
        computed(coll, {"doc": {"$unsetField": {"field": {"$literal": "$price"}, "input": "$$ROOT"}}}),
        [{"doc": SON([("_id", 1), ("item", "sweatshirt"), ("price.usd", 45.99), ("qty", 300)])}],
    )
    expect_error(5654602, coll, {"$getField": "$price"})


# ==============================================================================================
# Strings and regular expressions
# ==============================================================================================


@example("$regexFind / $regexFindAll / $regexMatch: the products collection")
def _():
    coll = fresh(
        "x_regex",
        [
            {"_id": 1, "description": "Single LINE description."},
            {"_id": 2, "description": "First lines\nsecond line"},
            {"_id": 3, "description": "Many spaces before     line"},
            {"_id": 4, "description": "Multiple\nline descriptions"},
            {"_id": 5, "description": "anchors, links and hyperlinks"},
            {"_id": 6, "description": "métier work vocation"},
        ],
    )
    same(
        computed(coll, {"returnObject": {"$regexFind": {"input": "$description", "regex": "line"}}}),
        [
            {"returnObject": None},
            {"returnObject": {"match": "line", "idx": 6, "captures": []}},
            {"returnObject": {"match": "line", "idx": 23, "captures": []}},
            {"returnObject": {"match": "line", "idx": 9, "captures": []}},
            {"returnObject": None},
            {"returnObject": None},
        ],
    )
    same(
        computed(coll, {"returnObject": {"$regexFind": {"input": "$description", "regex": Regex("lin(e|k)", "i")}}}, {"_id": {"$in": [1, 5]}}),
        [{"returnObject": {"match": "LINE", "idx": 7, "captures": ["E"]}}, {"returnObject": {"match": "link", "idx": 9, "captures": ["k"]}}],
    )
    same(
        computed(coll, {"returnObject": {"$regexFindAll": {"input": "$description", "regex": "line"}}}, {"_id": {"$in": [1, 2]}}),
        [{"returnObject": []}, {"returnObject": [{"match": "line", "idx": 6, "captures": []}, {"match": "line", "idx": 19, "captures": []}]}],
    )
    same(
        computed(coll, {"returnObject": {"$regexFind": {"input": "$description", "regex": "tier"}}}, {"_id": 6}),
        [{"returnObject": {"match": "tier", "idx": 2, "captures": []}}],
    )
    same(
        computed(coll, {"result": {"$regexMatch": {"input": "$description", "regex": "line", "options": "i"}}}),
        [{"result": True}, {"result": True}, {"result": True}, {"result": True}, {"result": False}, {"result": False}],
    )
    expect_error(51107, coll, {"$regexFind": {"input": "$description", "regex": Regex("line", "i"), "options": "s"}})


@example("$trim / $ltrim / $rtrim, $replaceOne / $replaceAll")
def _():
    coll = fresh(
        "x_strings",
        [
            {"_id": 1, "item": "ABC1", "quarter": "13Q1", "description": " product 1"},
            {"_id": 2, "item": "ABC2", "quarter": "13Q4", "description": "product 2 \n The product is in stock.  \n\n  "},
            {"_id": 3, "item": "XYZ1", "quarter": "14Q2", "description": None},
        ],
    )
    same(
        computed(coll, {"description": {"$trim": {"input": "$description"}}}),
        [{"description": "product 1"}, {"description": "product 2 \n The product is in stock."}, {"description": None}],
    )
    same(
        computed(coll, {"description": {"$ltrim": {"input": "$description"}}}, {"_id": 1}),
        [{"description": "product 1"}],
    )
    coll = fresh("x_replace", [{"_id": 1, "item": "blue paint"}, {"_id": 2, "item": "blue and green paint"}, {"_id": 3, "item": "blue paint with blue paintbrush"}, {"_id": 4, "item": "blue paint with green paintbrush"}])
    same(
        computed(coll, {"item": {"$replaceOne": {"input": "$item", "find": "blue paint", "replacement": "red paint"}}}),
        [{"item": "red paint"}, {"item": "blue and green paint"}, {"item": "red paint with blue paintbrush"}, {"item": "red paint with green paintbrush"}],
    )
    same(
        computed(coll, {"item": {"$replaceAll": {"input": "$item", "find": "blue paint", "replacement": "red paint"}}}),
        [{"item": "red paint"}, {"item": "blue and green paint"}, {"item": "red paint with red paintbrush"}, {"item": "red paint with green paintbrush"}],
    )


@example("$indexOfBytes / $indexOfCP")
def _():
    coll = fresh("x_index_of", [{"_id": 1, "item": "foo"}, {"_id": 2, "item": "fóofoo"}, {"_id": 3, "item": "the foo bar"}, {"_id": 4, "item": "hello world fóo"}, {"_id": 5, "item": None}, {"_id": 6, "amount": 3}])
    same(
        computed(coll, {"byteLocation": {"$indexOfBytes": ["$item", "foo"]}}),
        [{"byteLocation": 0}, {"byteLocation": 4}, {"byteLocation": 4}, {"byteLocation": -1}, {"byteLocation": None}, {"byteLocation": None}],
    )
    same(
        computed(coll, {"cpLocation": {"$indexOfCP": ["$item", "foo"]}}),
        [{"cpLocation": 0}, {"cpLocation": 3}, {"cpLocation": 4}, {"cpLocation": -1}, {"cpLocation": None}, {"cpLocation": None}],
    )


# ==============================================================================================
# Numbers
# ==============================================================================================


@example("$bitAnd / $bitOr / $bitXor / $bitNot: the switches collection")
def _():
    coll = fresh("x_bits", [{"_id": 0, "a": 0, "b": 127}, {"_id": 1, "a": 2, "b": 3}, {"_id": 2, "a": 3, "b": 5}])
    same(computed(coll, {"result": {"$bitAnd": ["$a", "$b"]}}), [{"result": 0}, {"result": 2}, {"result": 1}])
    same(computed(coll, {"result": {"$bitOr": ["$a", "$b"]}}), [{"result": 127}, {"result": 3}, {"result": 7}])
    same(computed(coll, {"result": {"$bitXor": ["$a", "$b"]}}), [{"result": 127}, {"result": 1}, {"result": 6}])
    same(computed(coll, {"result": {"$bitNot": "$a"}}), [{"result": -1}, {"result": -3}, {"result": -4}])
    same(computed(coll, {"result": {"$bitAnd": ["$a", Int64(1)]}}), [{"result": Int64(0)}, {"result": Int64(0)}, {"result": Int64(1)}])


@example("$round / $trunc with places")
def _():
    coll = fresh("x_round", [{"_id": 1, "value": 19.25}, {"_id": 2, "value": 28.73}, {"_id": 3, "value": 34.32}, {"_id": 4, "value": -45.39}])
    same(computed(coll, {"roundedValue": {"$round": ["$value", 1]}}), [{"roundedValue": 19.2}, {"roundedValue": 28.7}, {"roundedValue": 34.3}, {"roundedValue": -45.4}])
    same(computed(coll, {"roundedValue": {"$round": ["$value", -1]}}), [{"roundedValue": 20.0}, {"roundedValue": 30.0}, {"roundedValue": 30.0}, {"roundedValue": -50.0}])
    same(computed(coll, {"truncatedValue": {"$trunc": ["$value", 1]}}), [{"truncatedValue": 19.2}, {"truncatedValue": 28.7}, {"truncatedValue": 34.3}, {"truncatedValue": -45.3}])
    same(computed(coll, {"r": {"$round": [Decimal128("1.275"), 2]}}, {"_id": 1}), [{"r": Decimal128("1.28")}])


@example("trigonometry: the triangles example ($sin, $cos, $degreesToRadians, $radiansToDegrees, $atan2)")
def _():
    coll = fresh("x_trig", [{"_id": 1, "name": "triangle_a", "side_a": 3, "side_b": 4, "hypotenuse": 5, "angle_a": 36.87}])
    out = computed(
        coll,
        SON(
            [
                ("side_b", {"$multiply": [{"$cos": {"$degreesToRadians": "$angle_a"}}, "$hypotenuse"]}),
                ("angle_a", {"$radiansToDegrees": {"$atan2": ["$side_a", "$side_b"]}}),
                ("sin0", {"$sin": 0}),
            ]
        ),
    )[0]
    want_b = math.cos(36.87 * (math.pi / 180.0)) * 5
    want_a = math.atan2(3, 4) * (180.0 / math.pi)
    if not (out["side_b"] == want_b and out["angle_a"] == want_a and out["sin0"] == 0.0):
        raise Deviation(f"{LAST[0]}\n    got: {out!r}")
    # Decimal128 inputs give 34-digit Decimal128 results.
    same(
        computed(coll, {"sin": {"$sin": Decimal128("1")}}),
        [{"sin": Decimal128("0.8414709848078965066525023216302990")}],
    )
    expect_error(50989, coll, {"$acos": 2})


@example("$exp $ln $log $log10 $pow $sqrt: Decimal128 results to 34 digits")
def _():
    coll = fresh("x_decimal", [{"_id": 1}])
    same(
        computed(
            coll,
            SON(
                [
                    ("exp", {"$exp": Decimal128("1")}),
                    ("ln1", {"$ln": Decimal128("1")}),
                    ("log10", {"$log10": Decimal128("100")}),
                    ("log", {"$log": [Decimal128("64"), Decimal128("8")]}),
                    ("pow", {"$pow": [Decimal128("10.0"), -2]}),
                    ("sqrt", {"$sqrt": Decimal128("2")}),
                    ("double", {"$exp": 0}),
                ]
            ),
        ),
        [
            SON(
                [
                    ("exp", Decimal128("2.718281828459045235360287471352662")),
                    ("ln1", Decimal128("0")),
                    ("log10", Decimal128("2")),
                    ("log", Decimal128("2.000000000000000000000000000000000")),
                    ("pow", Decimal128("0.01000000000000000000000000000000000")),
                    ("sqrt", Decimal128("1.414213562373095048801688724209698")),
                    ("double", 1.0),
                ]
            )
        ],
    )


# ==============================================================================================
# Sizes, timestamps, hashing, randomness, variables
# ==============================================================================================


@example("$bsonSize / $binarySize")
def _():
    coll = fresh("x_sizes", [{"_id": 1, "name": "diagram1.png", "binary": Binary(b"\x01\x02\x03")}, {"_id": 2, "name": "hello", "binary": None}])
    same(computed(coll, {"size": {"$binarySize": "$binary"}}), [{"size": 3}, {"size": None}])
    same(computed(coll, {"size": {"$binarySize": "$name"}}), [{"size": 12}, {"size": 5}])
    docs = list(db.x_sizes.find({}, sort=[("_id", 1)]))
    same(computed(coll, {"size": {"$bsonSize": "$$ROOT"}}), [{"size": len(bson.encode(d))} for d in docs])
    expect_error(31393, coll, {"$bsonSize": "$name"})


@example("$tsSecond / $tsIncrement")
def _():
    coll = fresh("x_ts", [{"_id": 1, "saleTimestamp": Timestamp(1622731060, 1)}, {"_id": 2, "saleTimestamp": Timestamp(1622731060, 2)}])
    same(
        computed(coll, SON([("second", {"$tsSecond": "$saleTimestamp"}), ("increment", {"$tsIncrement": "$saleTimestamp"})])),
        [SON([("second", Int64(1622731060)), ("increment", Int64(1))]), SON([("second", Int64(1622731060)), ("increment", Int64(2))])],
    )


@example("$toHashedIndexKey: the hashed index key, a long")
def _():
    coll = fresh("x_hash", [{"_id": 1, "val": "string to hash"}, {"_id": 2, "val": 1}, {"_id": 3, "val": 1.0}])
    out = computed(coll, {"hashedVal": {"$toHashedIndexKey": "$val"}})
    if not all(isinstance(d["hashedVal"], Int64) for d in out) or out[1] != out[2]:
        raise Deviation(f"{LAST[0]}\n    got: {out!r}")
    # The same key the hashed index stores: the document is found through it.
    db.x_hash.create_index([("val", "hashed")])
    if len(list(db.x_hash.find({"val": "string to hash"}))) != 1:
        raise Deviation("hashed index lookup")


@example("$rand: a fresh double in [0, 1) per document")
def _():
    coll = fresh("x_rand", [{"_id": i} for i in range(20)])
    values = [d["r"] for d in computed(coll, {"r": {"$rand": {}}})]
    if not all(isinstance(v, float) and 0 <= v < 1 for v in values) or len(set(values)) < 18:
        raise Deviation(f"{LAST[0]}\n    got: {values!r}")


@example("$literal, $$NOW, $$CLUSTER_TIME, $function without server-side JavaScript")
def _():
    coll = fresh("x_misc", [{"_id": 1, "price": 10}])
    same(computed(coll, {"costsOneDollar": {"$eq": ["$price", {"$literal": "$1"}]}}), [{"costsOneDollar": False}])
    now = computed(coll, {"now": "$$NOW"})[0]["now"]
    if abs((now - datetime.datetime.utcnow()).total_seconds()) > 60:
        raise Deviation(f"$$NOW is {now}")
    try:
        out = computed(coll, {"t": "$$CLUSTER_TIME"})
        if not isinstance(out[0].get("t"), Timestamp):
            raise Deviation(f"$$CLUSTER_TIME gave {out!r}")
    except OperationFailure as e:
        # A standalone without a logical clock refuses it, as mongod does.
        if e.code != 51144:
            raise
    expect_error(31264, coll, {"$function": {"body": "function(x) { return x; }", "args": ["$price"], "lang": "js"}})


print(f"manual-expr: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
