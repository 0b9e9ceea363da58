//! Date expressions: the examples of the MongoDB 7.0 manual pages for `$dateToString
//! $dateFromString $dateToParts $dateFromParts $dateAdd $dateSubtract $dateDiff $dateTrunc
//! $year … $isoDayOfWeek $toDate`, plus time-zone, DST and error-code cases worked out from
//! date_time_support.cpp. Tables of expression × document → exact BSON value.

use bson::{
    Bson, DateTime, Document, RawBson, RawDocumentBuf, Timestamp, bson, doc, oid::ObjectId,
};
use cairn_query::QueryError;
use cairn_query::expr::{Expression, ParseContext, Variables};

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("encodable")
}

fn eval(expr: &Bson, input: &Document) -> Result<Option<Bson>, QueryError> {
    let holder = raw(&doc! {"e": expr.clone()});
    let v = holder.get("e").expect("readable").expect("present");
    let e = Expression::parse(v, &ParseContext::new())?;
    let out = e.evaluate(&raw(input), &Variables::with_now(DateTime::from_millis(0)))?;
    Ok(out.map(|r: RawBson| Bson::try_from(r).expect("convertible")))
}

fn code(e: &QueryError) -> i32 {
    match e {
        QueryError::BadValue(_) => 2,
        QueryError::FailedToParse(_) => 9,
        QueryError::TypeMismatch(_) => 14,
        QueryError::Location(c, _) => *c,
        QueryError::NotImplemented(_) => 238,
        _ => -1,
    }
}

/// An ISO-8601 UTC date.
fn iso(s: &str) -> Bson {
    Bson::DateTime(DateTime::parse_rfc3339_str(s).expect("valid date"))
}

#[track_caller]
fn table(doc: &Document, cases: &[(Bson, Bson)]) {
    for (expr, want) in cases {
        let got = eval(expr, doc).unwrap_or_else(|e| panic!("{expr}: {e:?}"));
        assert_eq!(got.as_ref(), Some(want), "{expr} on {doc}");
    }
}

#[track_caller]
fn errors(doc: &Document, cases: &[(Bson, i32)]) {
    for (expr, want) in cases {
        match eval(expr, doc) {
            Ok(v) => panic!("{expr} should fail with {want}, gave {v:?}"),
            Err(e) => assert_eq!(code(&e), *want, "{expr}: {e}"),
        }
    }
}

#[test]
fn date_to_string_manual() {
    let d = doc! {"_id": 1, "date": iso("2014-01-01T08:15:39.736Z")};
    table(
        &d,
        &[
            (
                bson!({"$dateToString": {"format": "%Y-%m-%d", "date": "$date"}}),
                bson!("2014-01-01"),
            ),
            (
                bson!({"$dateToString": {"format": "%H:%M:%S:%L%z", "date": "$date", "timezone": "America/New_York"}}),
                bson!("03:15:39:736-0500"),
            ),
            (
                bson!({"$dateToString": {"format": "%H:%M:%S:%L%z", "date": "$date", "timezone": "+04:30"}}),
                bson!("12:45:39:736+0430"),
            ),
            (
                bson!({"$dateToString": {"format": "%Z", "date": "$date", "timezone": "America/New_York"}}),
                bson!("-300"),
            ),
            (
                bson!({"$dateToString": {"format": "%Z", "date": "$date", "timezone": "+04:30"}}),
                bson!("270"),
            ),
            // The default format (always with Z in 7.0, even with a time zone).
            (
                bson!({"$dateToString": {"date": "$date"}}),
                bson!("2014-01-01T08:15:39.736Z"),
            ),
            (
                bson!({"$dateToString": {"date": "$date", "timezone": "Asia/Kolkata"}}),
                bson!("2014-01-01T13:45:39.736Z"),
            ),
            (
                bson!({"$dateToString": {"format": "%j %w %U %G-W%V-%u %b %B %%", "date": "$date"}}),
                bson!("001 4 00 2014-W01-3 Jan January %"),
            ),
            // onNull, and nullish arguments.
            (
                bson!({"$dateToString": {"date": "$nope", "onNull": "none"}}),
                bson!("none"),
            ),
            (bson!({"$dateToString": {"date": "$nope"}}), Bson::Null),
            (
                bson!({"$dateToString": {"date": "$date", "timezone": null}}),
                Bson::Null,
            ),
            (
                bson!({"$dateToString": {"date": "$date", "format": null}}),
                Bson::Null,
            ),
            // Timestamps and ObjectIds are dates too.
            (
                bson!({"$dateToString": {"date": {"$literal": Bson::Timestamp(Timestamp { time: 1_500_000_000, increment: 7 })}}}),
                bson!("2017-07-14T02:40:00.000Z"),
            ),
            (
                bson!({"$dateToString": {"date": {"$literal": Bson::ObjectId(ObjectId::parse_str("5a934e000102030405000000").unwrap())}, "format": "%Y-%m-%d"}}),
                bson!("2018-02-26"),
            ),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$dateToString": "x"}), 18629),
            (bson!({"$dateToString": {}}), 18628),
            (bson!({"$dateToString": {"date": "$date", "foo": 1}}), 18534),
            (
                bson!({"$dateToString": {"date": "$date", "format": 1}}),
                18533,
            ),
            (
                bson!({"$dateToString": {"date": "$date", "format": "%Y%"}}),
                18535,
            ),
            (
                bson!({"$dateToString": {"date": "$date", "format": "%q"}}),
                18536,
            ),
            (
                bson!({"$dateToString": {"date": "$date", "timezone": "Mars/Olympus"}}),
                40485,
            ),
            (
                bson!({"$dateToString": {"date": "$date", "timezone": 5}}),
                40517,
            ),
            (bson!({"$dateToString": {"date": "abc"}}), 16006),
            (
                bson!({"$dateToString": {"date": {"$literal": Bson::DateTime(DateTime::from_millis(253_402_300_800_000))}}}),
                18537,
            ),
        ],
    );
}

#[test]
fn date_parts_manual() {
    let d = doc! {"_id": 1, "date": iso("2014-01-01T08:15:39.736Z")};
    table(
        &d,
        &[
            (bson!({"$year": "$date"}), bson!(2014)),
            (bson!({"$month": "$date"}), bson!(1)),
            (bson!({"$dayOfMonth": "$date"}), bson!(1)),
            (bson!({"$hour": "$date"}), bson!(8)),
            (bson!({"$minute": "$date"}), bson!(15)),
            (bson!({"$second": "$date"}), bson!(39)),
            (bson!({"$millisecond": "$date"}), bson!(736)),
            (bson!({"$dayOfYear": "$date"}), bson!(1)),
            (bson!({"$dayOfWeek": "$date"}), bson!(4)),
            (bson!({"$week": "$date"}), bson!(0)),
            (bson!({"$isoWeek": "$date"}), bson!(1)),
            (bson!({"$isoWeekYear": "$date"}), Bson::Int64(2014)),
            (bson!({"$isoDayOfWeek": "$date"}), bson!(3)),
            (bson!({"$year": ["$date"]}), bson!(2014)),
            (
                bson!({"$hour": {"date": "$date", "timezone": "America/Chicago"}}),
                bson!(2),
            ),
            (
                bson!({"$minute": {"date": "$date", "timezone": "+05:30"}}),
                bson!(45),
            ),
            (
                bson!({"$dayOfMonth": {"date": "$date", "timezone": "-09"}}),
                bson!(31),
            ),
            (
                bson!({"$year": {"date": "$date", "timezone": "-0900"}}),
                bson!(2013),
            ),
            (bson!({"$year": "$nope"}), Bson::Null),
            (
                bson!({"$year": {"date": "$date", "timezone": "$nope"}}),
                Bson::Null,
            ),
            // Before 1970.
            (
                bson!({"$millisecond": {"$literal": Bson::DateTime(DateTime::from_millis(-1))}}),
                bson!(999),
            ),
            (
                bson!({"$year": {"$literal": Bson::DateTime(DateTime::from_millis(-1))}}),
                bson!(1969),
            ),
        ],
    );
    // ISO week-numbering years at the year boundary.
    let boundary = doc! {"a": iso("2016-01-01T00:00:00Z"), "b": iso("2020-12-31T00:00:00Z")};
    table(
        &boundary,
        &[
            (bson!({"$isoWeekYear": "$a"}), Bson::Int64(2015)),
            (bson!({"$isoWeek": "$a"}), bson!(53)),
            (bson!({"$isoWeek": "$b"}), bson!(53)),
            (bson!({"$week": "$b"}), bson!(52)),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$year": "abc"}), 16006),
            (bson!({"$year": {"date": "$date", "foo": 1}}), 40535),
            (bson!({"$year": {"timezone": "UTC"}}), 40539),
            (bson!({"$year": ["$date", "$date"]}), 40536),
            (
                bson!({"$year": {"date": "$date", "timezone": "XYZ"}}),
                40485,
            ),
            (bson!({"$year": {"date": "$date", "timezone": 1}}), 40517),
        ],
    );
}

#[test]
fn date_to_parts_manual() {
    let d = doc! {"_id": 2, "item": "abc", "date": iso("2017-01-01T01:29:09.123Z")};
    table(
        &d,
        &[
            (
                bson!({"$dateToParts": {"date": "$date"}}),
                bson!({"year": 2017, "month": 1, "day": 1, "hour": 1, "minute": 29, "second": 9, "millisecond": 123}),
            ),
            (
                bson!({"$dateToParts": {"date": "$date", "iso8601": true}}),
                bson!({"isoWeekYear": 2016, "isoWeek": 52, "isoDayOfWeek": 7, "hour": 1, "minute": 29, "second": 9, "millisecond": 123}),
            ),
            (
                bson!({"$dateToParts": {"date": "$date", "timezone": "America/New_York"}}),
                bson!({"year": 2016, "month": 12, "day": 31, "hour": 20, "minute": 29, "second": 9, "millisecond": 123}),
            ),
            (
                bson!({"$dateToParts": {"date": "$date", "iso8601": null}}),
                Bson::Null,
            ),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$dateToParts": 1}), 40524),
            (bson!({"$dateToParts": {}}), 40522),
            (bson!({"$dateToParts": {"date": "$date", "x": 1}}), 40520),
            (
                bson!({"$dateToParts": {"date": "$date", "iso8601": 1}}),
                40521,
            ),
        ],
    );
}

#[test]
fn date_from_parts_manual() {
    let d = doc! {};
    table(
        &d,
        &[
            (
                bson!({"$dateFromParts": {"year": 2017, "month": 2, "day": 8, "hour": 12}}),
                iso("2017-02-08T12:00:00Z"),
            ),
            (
                bson!({"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 6, "isoDayOfWeek": 3, "hour": 12}}),
                iso("2017-02-08T12:00:00Z"),
            ),
            (
                bson!({"$dateFromParts": {"year": 2016, "month": 12, "day": 31, "hour": 23, "minute": 46, "second": 12, "timezone": "America/New_York"}}),
                iso("2017-01-01T04:46:12Z"),
            ),
            // Values out of range carry over.
            (
                bson!({"$dateFromParts": {"year": 2017, "month": 14, "day": 1, "hour": 12}}),
                iso("2018-02-01T12:00:00Z"),
            ),
            (
                bson!({"$dateFromParts": {"year": 2017, "month": 0, "day": 1, "hour": 12}}),
                iso("2016-12-01T12:00:00Z"),
            ),
            (
                bson!({"$dateFromParts": {"year": 2017, "month": 2, "day": 0}}),
                iso("2017-01-31T00:00:00Z"),
            ),
            (
                bson!({"$dateFromParts": {"year": 2017, "hour": -1}}),
                iso("2016-12-31T23:00:00Z"),
            ),
            (
                bson!({"$dateFromParts": {"year": 2017, "millisecond": 1500}}),
                iso("2017-01-01T00:00:01.500Z"),
            ),
            (
                bson!({"$dateFromParts": {"year": 2017, "month": null}}),
                Bson::Null,
            ),
            (
                bson!({"$dateFromParts": {"year": 2017.0, "month": 3}}),
                iso("2017-03-01T00:00:00Z"),
            ),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$dateFromParts": 1}), 40519),
            (bson!({"$dateFromParts": {"month": 1}}), 40516),
            (
                bson!({"$dateFromParts": {"year": 2017, "isoWeek": 1}}),
                40489,
            ),
            (
                bson!({"$dateFromParts": {"isoWeekYear": 2017, "month": 1}}),
                40525,
            ),
            (bson!({"$dateFromParts": {"year": 2017, "foo": 1}}), 40518),
            (bson!({"$dateFromParts": {"year": 10000}}), 40523),
            (bson!({"$dateFromParts": {"isoWeekYear": 0}}), 31095),
            (
                bson!({"$dateFromParts": {"year": 2017, "month": 40000}}),
                31034,
            ),
            (bson!({"$dateFromParts": {"year": 2017.5}}), 40515),
            (bson!({"$dateFromParts": {"year": "2017"}}), 40515),
        ],
    );
}

#[test]
fn date_from_string_manual() {
    let d = doc! {};
    table(
        &d,
        &[
            (
                bson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40.787"}}),
                iso("2017-02-08T12:10:40.787Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40.787", "timezone": "America/New_York"}}),
                iso("2017-02-08T17:10:40.787Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "2017-02-08"}}),
                iso("2017-02-08T00:00:00Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "06-15-2018", "format": "%m-%d-%Y"}}),
                iso("2018-06-15T00:00:00Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "15-06-2018", "format": "%d-%m-%Y"}}),
                iso("2018-06-15T00:00:00Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "2017-02-08", "timezone": "-05:00"}}),
                iso("2017-02-08T05:00:00Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "2017-02-09", "timezone": "Europe/London"}}),
                iso("2017-02-09T00:00:00Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "2017-02-09T03:35:02.055", "timezone": "+0530"}}),
                iso("2017-02-08T22:05:02.055Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "20177-02-09T03:35:02.055", "onError": "bad"}}),
                bson!("bad"),
            ),
            (
                bson!({"$dateFromString": {"dateString": null, "onNull": {"$literal": Bson::DateTime(DateTime::from_millis(0))}}}),
                iso("1970-01-01T00:00:00Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40Z"}}),
                iso("2017-02-08T12:10:40Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40+02:00"}}),
                iso("2017-02-08T10:10:40Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40Z", "timezone": "UTC"}}),
                iso("2017-02-08T12:10:40Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "Jan 3, 2018 14:30", "timezone": "+01"}}),
                iso("2018-01-03T13:30:00Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "2018-W02-3", "format": "%G-W%V-%u"}}),
                iso("2018-01-10T00:00:00Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "March 7, 2021", "format": "%B %d, %Y"}}),
                iso("2021-03-07T00:00:00Z"),
            ),
            (
                bson!({"$dateFromString": {"dateString": "2021-070", "format": "%Y-%j"}}),
                iso("2021-03-11T00:00:00Z"),
            ),
            (
                bson!({"$toDate": "2018-03-03"}),
                iso("2018-03-03T00:00:00Z"),
            ),
            (
                bson!({"$toDate": 120_000_000_000.5f64}),
                iso("1973-10-20T21:20:00Z"),
            ),
            (
                bson!({"$convert": {"input": "oops", "to": "date", "onError": "x"}}),
                bson!("x"),
            ),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$dateFromString": 1}), 40540),
            (bson!({"$dateFromString": {}}), 40542),
            (
                bson!({"$dateFromString": {"dateString": "x", "foo": 1}}),
                40541,
            ),
            (
                bson!({"$dateFromString": {"dateString": "2017-01-01", "format": 5}}),
                40684,
            ),
            (
                bson!({"$dateFromString": {"dateString": "20177-02-09T03:35:02.055"}}),
                241,
            ),
            (
                bson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40Z", "timezone": "Europe/Paris"}}),
                241,
            ),
            (
                bson!({"$dateFromString": {"dateString": "2017-02-08 +0100", "timezone": "Europe/Paris"}}),
                241,
            ),
            (
                bson!({"$dateFromString": {"dateString": "2017-02-08 Europe/Paris"}}),
                241,
            ),
            (bson!({"$dateFromString": {"dateString": 5}}), 241),
            (
                bson!({"$dateFromString": {"dateString": "07-2018", "format": "%m-%Y"}}),
                241,
            ),
            (
                bson!({"$dateFromString": {"dateString": "2018-07-01x", "format": "%Y-%m-%d"}}),
                241,
            ),
            (bson!({"$toDate": "not a date"}), 241),
        ],
    );
}

#[test]
fn date_add_subtract_manual() {
    let d =
        doc! {"purchaseDate": iso("2020-10-31T12:10:05Z"), "login": iso("2021-01-10T10:00:00Z")};
    table(
        &d,
        &[
            (
                bson!({"$dateAdd": {"startDate": "$purchaseDate", "unit": "day", "amount": 3}}),
                iso("2020-11-03T12:10:05Z"),
            ),
            // Month ends are clamped.
            (
                bson!({"$dateAdd": {"startDate": "$purchaseDate", "unit": "month", "amount": 1}}),
                iso("2020-11-30T12:10:05Z"),
            ),
            (
                bson!({"$dateAdd": {"startDate": "$purchaseDate", "unit": "quarter", "amount": 1}}),
                iso("2021-01-31T12:10:05Z"),
            ),
            (
                bson!({"$dateAdd": {"startDate": {"$literal": iso("2020-02-29T00:00:00Z")}, "unit": "year", "amount": 1}}),
                iso("2021-02-28T00:00:00Z"),
            ),
            (
                bson!({"$dateSubtract": {"startDate": "$login", "unit": "week", "amount": 1}}),
                iso("2021-01-03T10:00:00Z"),
            ),
            (
                bson!({"$dateSubtract": {"startDate": "$login", "unit": "hour", "amount": 2}}),
                iso("2021-01-10T08:00:00Z"),
            ),
            // Across a DST change, days keep the local time; hours are exact durations.
            (
                bson!({"$dateAdd": {"startDate": {"$literal": iso("2021-03-13T15:00:00Z")}, "unit": "day", "amount": 1, "timezone": "America/New_York"}}),
                iso("2021-03-14T14:00:00Z"),
            ),
            (
                bson!({"$dateAdd": {"startDate": {"$literal": iso("2021-03-13T15:00:00Z")}, "unit": "hour", "amount": 24, "timezone": "America/New_York"}}),
                iso("2021-03-14T15:00:00Z"),
            ),
            (
                bson!({"$dateAdd": {"startDate": {"$literal": iso("2020-11-01T05:50:02Z")}, "unit": "hour", "amount": 1, "timezone": "America/New_York"}}),
                iso("2020-11-01T06:50:02Z"),
            ),
            (
                bson!({"$dateAdd": {"startDate": "$nope", "unit": "day", "amount": 1}}),
                Bson::Null,
            ),
            (
                bson!({"$dateAdd": {"startDate": "$login", "unit": null, "amount": 1}}),
                Bson::Null,
            ),
            (
                bson!({"$dateAdd": {"startDate": "$login", "unit": "day", "amount": 1.0}}),
                iso("2021-01-11T10:00:00Z"),
            ),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$dateAdd": 1}), 5166400),
            (
                bson!({"$dateAdd": {"startDate": "$login", "unit": "day"}}),
                5166402,
            ),
            (
                bson!({"$dateAdd": {"startDate": "$login", "unit": "day", "amount": 1, "x": 1}}),
                5166401,
            ),
            (
                bson!({"$dateAdd": {"startDate": "x", "unit": "day", "amount": 1}}),
                5166403,
            ),
            (
                bson!({"$dateAdd": {"startDate": "$login", "unit": "day", "amount": 1.5}}),
                5166405,
            ),
            (
                bson!({"$dateAdd": {"startDate": "$login", "unit": "decade", "amount": 1}}),
                5439014,
            ),
            (
                bson!({"$dateAdd": {"startDate": "$login", "unit": 1, "amount": 1}}),
                5439013,
            ),
            (
                bson!({"$dateAdd": {"startDate": "$login", "unit": "year", "amount": 1_000_000_000_000i64}}),
                5976500,
            ),
            (
                bson!({"$dateAdd": {"startDate": "$login", "unit": "millisecond", "amount": i64::MAX}}),
                5166406,
            ),
            (
                bson!({"$dateSubtract": {"startDate": "$login", "unit": "millisecond", "amount": i64::MIN}}),
                6045000,
            ),
        ],
    );
}

#[test]
fn date_diff_manual() {
    let d = doc! {
        "purchased": iso("2020-01-01T00:00:00Z"),
        "delivered": iso("2020-01-10T23:59:00Z"),
        "a": iso("2021-01-31T00:00:00Z"),
        "b": iso("2021-02-01T00:00:00Z"),
    };
    table(
        &d,
        &[
            (
                bson!({"$dateDiff": {"startDate": "$purchased", "endDate": "$delivered", "unit": "day"}}),
                Bson::Int64(9),
            ),
            (
                bson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "month"}}),
                Bson::Int64(1),
            ),
            (
                bson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "year"}}),
                Bson::Int64(0),
            ),
            (
                bson!({"$dateDiff": {"startDate": "$b", "endDate": "$a", "unit": "day"}}),
                Bson::Int64(-1),
            ),
            (
                bson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "millisecond"}}),
                Bson::Int64(86_400_000),
            ),
            // 2021-01-31 is a Sunday: a week boundary when weeks start on Sunday (the default),
            // none when they start on Monday.
            (
                bson!({"$dateDiff": {"startDate": {"$literal": iso("2021-01-30T00:00:00Z")}, "endDate": "$a", "unit": "week"}}),
                Bson::Int64(1),
            ),
            (
                bson!({"$dateDiff": {"startDate": {"$literal": iso("2021-01-30T00:00:00Z")}, "endDate": "$a", "unit": "week", "startOfWeek": "mon"}}),
                Bson::Int64(0),
            ),
            // Hours across the spring-forward gap count elapsed hours.
            (
                bson!({"$dateDiff": {"startDate": {"$literal": iso("2021-03-14T05:00:00Z")}, "endDate": {"$literal": iso("2021-03-14T08:00:00Z")}, "unit": "hour", "timezone": "America/New_York"}}),
                Bson::Int64(3),
            ),
            (
                bson!({"$dateDiff": {"startDate": {"$literal": iso("2020-12-31T23:00:00Z")}, "endDate": {"$literal": iso("2021-01-01T01:00:00Z")}, "unit": "year", "timezone": "America/New_York"}}),
                Bson::Int64(0),
            ),
            (
                bson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "quarter"}}),
                Bson::Int64(0),
            ),
            (
                bson!({"$dateDiff": {"startDate": "$nope", "endDate": "$b", "unit": "day"}}),
                Bson::Null,
            ),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$dateDiff": 1}), 5166301),
            (
                bson!({"$dateDiff": {"endDate": "$b", "unit": "day"}}),
                5166303,
            ),
            (
                bson!({"$dateDiff": {"startDate": "$a", "unit": "day"}}),
                5166304,
            ),
            (
                bson!({"$dateDiff": {"startDate": "$a", "endDate": "$b"}}),
                5166305,
            ),
            (
                bson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "day", "z": 1}}),
                5166302,
            ),
            (
                bson!({"$dateDiff": {"startDate": "x", "endDate": "$b", "unit": "day"}}),
                5166307,
            ),
            (
                bson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "week", "startOfWeek": "someday"}}),
                5439016,
            ),
            (
                bson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "day", "timezone": "INVALID"}}),
                40485,
            ),
        ],
    );
}

#[test]
fn date_trunc_manual() {
    let d = doc! {"orderDate": iso("2020-05-18T14:10:30Z")};
    table(
        &d,
        &[
            (
                bson!({"$dateTrunc": {"date": "$orderDate", "unit": "week", "binSize": 2, "timezone": "America/Los_Angeles", "startOfWeek": "Monday"}}),
                iso("2020-05-11T07:00:00Z"),
            ),
            (
                bson!({"$dateTrunc": {"date": "$orderDate", "unit": "month"}}),
                iso("2020-05-01T00:00:00Z"),
            ),
            (
                bson!({"$dateTrunc": {"date": "$orderDate", "unit": "quarter"}}),
                iso("2020-04-01T00:00:00Z"),
            ),
            (
                bson!({"$dateTrunc": {"date": "$orderDate", "unit": "year", "binSize": 5}}),
                iso("2020-01-01T00:00:00Z"),
            ),
            (
                bson!({"$dateTrunc": {"date": "$orderDate", "unit": "hour", "binSize": 4}}),
                iso("2020-05-18T12:00:00Z"),
            ),
            (
                bson!({"$dateTrunc": {"date": "$orderDate", "unit": "minute", "binSize": 15}}),
                iso("2020-05-18T14:00:00Z"),
            ),
            (
                bson!({"$dateTrunc": {"date": "$orderDate", "unit": "day", "timezone": "+05:30"}}),
                iso("2020-05-17T18:30:00Z"),
            ),
            (
                bson!({"$dateTrunc": {"date": "$orderDate", "unit": "week"}}),
                iso("2020-05-17T00:00:00Z"),
            ),
            (
                bson!({"$dateTrunc": {"date": "$orderDate", "unit": "second", "binSize": null}}),
                Bson::Null,
            ),
        ],
    );
    errors(
        &d,
        &[
            (
                bson!({"$dateTrunc": {"date": "$orderDate", "unit": "day", "binSize": 0}}),
                5439018,
            ),
            (
                bson!({"$dateTrunc": {"date": "$orderDate", "unit": "day", "binSize": 1.5}}),
                5439017,
            ),
            (bson!({"$dateTrunc": {"date": 5, "unit": "day"}}), 5166307),
            (
                bson!({"$dateTrunc": {"date": "$orderDate", "unit": "eon"}}),
                5439014,
            ),
        ],
    );
}

#[test]
fn time_zones_and_dst() {
    // The UTC offset of a zone follows its rules at each instant.
    let d = doc! {"winter": iso("2021-01-15T12:00:00Z"), "summer": iso("2021-07-15T12:00:00Z")};
    table(
        &d,
        &[
            (
                bson!({"$dateToString": {"date": "$winter", "format": "%z", "timezone": "Europe/Berlin"}}),
                bson!("+0100"),
            ),
            (
                bson!({"$dateToString": {"date": "$summer", "format": "%z", "timezone": "Europe/Berlin"}}),
                bson!("+0200"),
            ),
            (
                bson!({"$dateToString": {"date": "$summer", "format": "%z", "timezone": "Australia/Adelaide"}}),
                bson!("+0930"),
            ),
            (
                bson!({"$dateToString": {"date": "$summer", "format": "%Z", "timezone": "-03:30"}}),
                bson!("-210"),
            ),
            (
                bson!({"$hour": {"date": "$summer", "timezone": "GMT"}}),
                bson!(12),
            ),
            (
                bson!({"$hour": {"date": "$summer", "timezone": "UTC"}}),
                bson!(12),
            ),
            // Local times in a gap move forward; overlaps take the earlier offset west of UTC.
            (
                bson!({"$dateFromParts": {"year": 2021, "month": 3, "day": 14, "hour": 2, "minute": 30, "timezone": "America/New_York"}}),
                iso("2021-03-14T07:30:00Z"),
            ),
            (
                bson!({"$dateFromParts": {"year": 2021, "month": 11, "day": 7, "hour": 1, "minute": 30, "timezone": "America/New_York"}}),
                iso("2021-11-07T05:30:00Z"),
            ),
        ],
    );
    // Names are case-sensitive; offsets need two-digit hours.
    errors(
        &d,
        &[
            (
                bson!({"$hour": {"date": "$summer", "timezone": "europe/berlin"}}),
                40485,
            ),
            (
                bson!({"$hour": {"date": "$summer", "timezone": "+5"}}),
                40485,
            ),
            (bson!({"$hour": {"date": "$summer", "timezone": ""}}), 40485),
        ],
    );
}
