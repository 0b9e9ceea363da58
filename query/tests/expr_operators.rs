//! Expression operators beyond arithmetic and dates: the examples of their MongoDB 7.0 manual
//! pages (sets, regex, strings, objects, fields, `$sortArray`, `$zip`, bitwise, trigonometry,
//! sizes, timestamps, `$toHashedIndexKey`, `$rand`, `$meta`, `$function`) and system variables,
//! with exact BSON types and MongoDB's error codes.

use bson::{
    Binary, Bson, DateTime, Decimal128, Document, RawBson, RawDocumentBuf, Regex, Timestamp, bson,
    doc, spec::BinarySubtype,
};
use cairn_query::QueryError;
use cairn_query::expr::{Expression, ParseContext, Variables};

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("encodable")
}

fn eval_with(expr: &Bson, input: &Document, vars: &Variables) -> Result<Option<Bson>, QueryError> {
    let holder = raw(&doc! {"e": expr.clone()});
    let v = holder.get("e").expect("readable").expect("present");
    let e = Expression::parse(v, &ParseContext::for_variables(vars))?;
    let out = e.evaluate(&raw(input), vars)?;
    Ok(out.map(|r: RawBson| Bson::try_from(r).expect("convertible")))
}

fn eval(expr: &Bson, input: &Document) -> Result<Option<Bson>, QueryError> {
    eval_with(expr, input, &Variables::with_now(DateTime::from_millis(0)))
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

fn dec(s: &str) -> Bson {
    Bson::Decimal128(s.parse::<Decimal128>().expect("decimal"))
}

#[track_caller]
fn table(doc: &Document, cases: &[(Bson, Option<Bson>)]) {
    for (expr, want) in cases {
        let got = eval(expr, doc).unwrap_or_else(|e| panic!("{expr}: {e:?}"));
        assert_eq!(&got, want, "{expr} on {doc}");
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

fn re(pattern: &str, options: &str) -> Regex {
    Regex {
        pattern: pattern.to_string().try_into().expect("pattern"),
        options: options.to_string().try_into().expect("options"),
    }
}

fn some(b: Bson) -> Option<Bson> {
    Some(b)
}

#[test]
fn set_operators() {
    let d = doc! {"A": ["red", "blue"], "B": ["blue", "red", "red"], "C": ["green"], "E": []};
    table(
        &d,
        &[
            (bson!({"$setEquals": ["$A", "$B"]}), some(bson!(true))),
            (bson!({"$setEquals": ["$A", "$C"]}), some(bson!(false))),
            (bson!({"$setIsSubset": ["$A", "$B"]}), some(bson!(true))),
            (bson!({"$setIsSubset": ["$E", "$C"]}), some(bson!(true))),
            (
                bson!({"$setIntersection": ["$A", "$B"]}),
                some(bson!(["red", "blue"])),
            ),
            (bson!({"$setIntersection": ["$A", "$C"]}), some(bson!([]))),
            (bson!({"$setIntersection": []}), some(bson!([]))),
            (
                bson!({"$setUnion": ["$A", "$C"]}),
                some(bson!(["red", "blue", "green"])),
            ),
            (bson!({"$setUnion": ["$A", "$nope"]}), some(Bson::Null)),
            (bson!({"$setDifference": ["$B", "$A"]}), some(bson!([]))),
            (
                bson!({"$setDifference": ["$A", "$C"]}),
                some(bson!(["red", "blue"])),
            ),
            (bson!({"$setDifference": ["$nope", "$C"]}), some(Bson::Null)),
            (
                bson!({"$setUnion": [[1, 1.0, 2], [2]]}),
                some(bson!([1, 2])),
            ),
            (
                bson!({"$allElementsTrue": [[true, 1, "x"]]}),
                some(bson!(true)),
            ),
            (
                bson!({"$anyElementTrue": [[false, 0, null]]}),
                some(bson!(false)),
            ),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$setEquals": ["$A"]}), 17045),
            (bson!({"$setEquals": ["$A", 1]}), 17044),
            (bson!({"$setIsSubset": [1, "$A"]}), 17046),
            (bson!({"$setIsSubset": ["$A", "$nope"]}), 17042),
            (bson!({"$setIntersection": ["$A", 1]}), 17047),
            (bson!({"$setUnion": ["$A", 1]}), 17043),
            (bson!({"$setDifference": [1, "$A"]}), 17048),
            (bson!({"$setDifference": ["$A", 1]}), 17049),
        ],
    );
}

#[test]
fn regex_operators() {
    let d = doc! {"description": "Single LINE description.", "multi": "First lines\nsecond line", "cat": "café au lait"};
    table(
        &d,
        &[
            (
                bson!({"$regexFind": {"input": "$description", "regex": "line"}}),
                some(Bson::Null),
            ),
            (
                bson!({"$regexFind": {"input": "$description", "regex": "line", "options": "i"}}),
                some(bson!({"match": "LINE", "idx": 7, "captures": []})),
            ),
            (
                bson!({"$regexFind": {"input": "$description", "regex": Bson::RegularExpression(re("(l)(x)?ine", "i"))}}),
                some(bson!({"match": "LINE", "idx": 7, "captures": ["L", null]})),
            ),
            (
                bson!({"$regexFindAll": {"input": "$multi", "regex": "^[a-z]+", "options": "im"}}),
                some(bson!([
                    {"match": "First", "idx": 0, "captures": []},
                    {"match": "second", "idx": 12, "captures": []}
                ])),
            ),
            (
                bson!({"$regexFindAll": {"input": "abc", "regex": ""}}),
                some(bson!([
                    {"match": "", "idx": 0, "captures": []},
                    {"match": "", "idx": 1, "captures": []},
                    {"match": "", "idx": 2, "captures": []},
                    {"match": "", "idx": 3, "captures": []}
                ])),
            ),
            // idx counts code points.
            (
                bson!({"$regexFind": {"input": "$cat", "regex": "au"}}),
                some(bson!({"match": "au", "idx": 5, "captures": []})),
            ),
            (
                bson!({"$regexMatch": {"input": "$description", "regex": "line"}}),
                some(bson!(false)),
            ),
            (
                bson!({"$regexMatch": {"input": "$description", "regex": "line", "options": "i"}}),
                some(bson!(true)),
            ),
            (
                bson!({"$regexMatch": {"input": "$nope", "regex": "line"}}),
                some(bson!(false)),
            ),
            (
                bson!({"$regexFindAll": {"input": null, "regex": "line"}}),
                some(bson!([])),
            ),
            (
                bson!({"$regexFind": {"input": "$description", "regex": null}}),
                some(Bson::Null),
            ),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$regexFind": "x"}), 51103),
            (bson!({"$regexFind": {"regex": "x"}}), 31022),
            (bson!({"$regexFind": {"input": "x"}}), 31023),
            (
                bson!({"$regexFind": {"input": "x", "regex": "x", "foo": 1}}),
                31024,
            ),
            (bson!({"$regexFind": {"input": 1, "regex": "x"}}), 51104),
            (bson!({"$regexFind": {"input": "x", "regex": 1}}), 51105),
            (
                bson!({"$regexFind": {"input": "x", "regex": "x", "options": 1}}),
                51106,
            ),
            (
                bson!({"$regexFind": {"input": "x", "regex": Bson::RegularExpression(re("x", "i")), "options": "m"}}),
                51107,
            ),
            (
                bson!({"$regexFind": {"input": "x", "regex": "x", "options": "q"}}),
                51108,
            ),
            (bson!({"$regexFind": {"input": "x", "regex": "("}}), 51111),
        ],
    );
}

#[test]
fn string_operators() {
    let d = doc! {"s": "  \u{2000}ggggoodbyeeeee\t", "h": "hello world", "u": "cafétéria"};
    table(
        &d,
        &[
            (
                bson!({"$trim": {"input": "$s"}}),
                some(bson!("ggggoodbyeeeee")),
            ),
            (
                bson!({"$ltrim": {"input": "$s"}}),
                some(bson!("ggggoodbyeeeee\t")),
            ),
            (
                bson!({"$rtrim": {"input": "$s"}}),
                some(bson!("  \u{2000}ggggoodbyeeeee")),
            ),
            (
                bson!({"$trim": {"input": "ggggoodbyeeeee", "chars": "ge"}}),
                some(bson!("oodby")),
            ),
            (bson!({"$trim": {"input": "$nope"}}), some(Bson::Null)),
            (
                bson!({"$replaceOne": {"input": "$h", "find": "o", "replacement": "0"}}),
                some(bson!("hell0 world")),
            ),
            (
                bson!({"$replaceAll": {"input": "$h", "find": "o", "replacement": "0"}}),
                some(bson!("hell0 w0rld")),
            ),
            (
                bson!({"$replaceAll": {"input": "abc", "find": "", "replacement": "-"}}),
                some(bson!("-a-b-c-")),
            ),
            (
                bson!({"$replaceAll": {"input": "$h", "find": null, "replacement": "0"}}),
                some(Bson::Null),
            ),
            (bson!({"$indexOfBytes": ["cafeteria", "e"]}), some(bson!(3))),
            (bson!({"$indexOfBytes": ["cafétéria", "é"]}), some(bson!(3))),
            (bson!({"$indexOfBytes": ["cafétéria", "t"]}), some(bson!(5))),
            (bson!({"$indexOfCP": ["cafétéria", "t"]}), some(bson!(4))),
            (bson!({"$indexOfCP": ["cafétéria", "é", 4]}), some(bson!(5))),
            (
                bson!({"$indexOfBytes": ["abc", "b", 0, 1]}),
                some(bson!(-1)),
            ),
            (bson!({"$indexOfBytes": ["abc", "", 3]}), some(bson!(3))),
            (bson!({"$indexOfBytes": ["abc", "b", 5]}), some(bson!(-1))),
            (bson!({"$indexOfCP": [null, "b"]}), some(Bson::Null)),
            (
                bson!({"$toObjectId": "5ab9cbfa31c2ab715d42129e"}),
                some(Bson::ObjectId("5ab9cbfa31c2ab715d42129e".parse().unwrap())),
            ),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$trim": "x"}), 50696),
            (bson!({"$trim": {"chars": "x"}}), 50695),
            (bson!({"$trim": {"input": "x", "foo": 1}}), 50694),
            (bson!({"$trim": {"input": 1}}), 50699),
            (bson!({"$trim": {"input": "x", "chars": 1}}), 50700),
            (bson!({"$replaceOne": 1}), 51751),
            (
                bson!({"$replaceOne": {"find": "a", "replacement": "b"}}),
                51749,
            ),
            (
                bson!({"$replaceOne": {"input": "a", "replacement": "b"}}),
                51748,
            ),
            (bson!({"$replaceOne": {"input": "a", "find": "b"}}), 51747),
            (
                bson!({"$replaceOne": {"input": "a", "find": "b", "replacement": "c", "x": 1}}),
                51750,
            ),
            (
                bson!({"$replaceAll": {"input": 1, "find": "b", "replacement": "c"}}),
                51746,
            ),
            (bson!({"$indexOfBytes": [1, "b"]}), 40091),
            (bson!({"$indexOfBytes": ["a", 1]}), 40092),
            (bson!({"$indexOfCP": [1, "b"]}), 40093),
            (bson!({"$indexOfCP": ["a", null]}), 40094),
            (bson!({"$indexOfCP": ["a", "b", -1]}), 40097),
            (bson!({"$indexOfCP": ["a", "b", 1.5]}), 40096),
            (bson!({"$toObjectId": "xyz"}), 241),
        ],
    );
}

#[test]
fn object_operators() {
    let d = doc! {"dims": {"l": 25, "w": 10, "uom": "cm"}, "kv": [["item", "abc"], ["qty", 25]], "docs": [{"k": "a", "v": 1}, {"k": "a", "v": 2}, {"k": "b", "v": 3}]};
    table(
        &d,
        &[
            (
                bson!({"$objectToArray": "$dims"}),
                some(bson!([{"k": "l", "v": 25}, {"k": "w", "v": 10}, {"k": "uom", "v": "cm"}])),
            ),
            (bson!({"$objectToArray": "$nope"}), some(Bson::Null)),
            (
                bson!({"$arrayToObject": "$kv"}),
                some(bson!({"item": "abc", "qty": 25})),
            ),
            (
                bson!({"$arrayToObject": "$docs"}),
                some(bson!({"a": 2, "b": 3})),
            ),
            (bson!({"$arrayToObject": [[]]}), some(bson!({}))),
            (
                bson!({"$mergeObjects": [{"a": 1, "b": 1}, null, {"b": 2, "c": 3}, "$nope"]}),
                some(bson!({"a": 1, "b": 2, "c": 3})),
            ),
            (bson!({"$mergeObjects": []}), some(bson!({}))),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$objectToArray": 1}), 40390),
            (bson!({"$arrayToObject": 1}), 40386),
            (bson!({"$arrayToObject": [[1]]}), 40398),
            (bson!({"$arrayToObject": [[["a", 1, 2]]]}), 40396),
            (bson!({"$arrayToObject": [[[1, 2]]]}), 40395),
            (bson!({"$arrayToObject": [[{"k": "a"}]]}), 40392),
            (bson!({"$arrayToObject": [[{"k": 1, "v": 2}]]}), 40394),
            (bson!({"$mergeObjects": [{"a": 1}, 5]}), 40400),
        ],
    );
}

#[test]
fn field_operators() {
    let d = doc! {"price.usd": 45, "$price": 10, "qty": 3, "sub": {"a.b": 1, "c": 2}};
    table(
        &d,
        &[
            (bson!({"$getField": "price.usd"}), some(bson!(45))),
            (
                bson!({"$getField": {"$literal": "$price"}}),
                some(bson!(10)),
            ),
            (
                bson!({"$getField": {"field": "a.b", "input": "$sub"}}),
                some(bson!(1)),
            ),
            (bson!({"$getField": {"field": "zz", "input": "$sub"}}), None),
            (
                bson!({"$getField": {"field": "a", "input": null}}),
                some(Bson::Null),
            ),
            (
                bson!({"$setField": {"field": "price.usd", "input": "$$ROOT", "value": 50}}),
                some(bson!({"price.usd": 50, "$price": 10, "qty": 3, "sub": {"a.b": 1, "c": 2}})),
            ),
            (
                bson!({"$setField": {"field": "new", "input": "$sub", "value": true}}),
                some(bson!({"a.b": 1, "c": 2, "new": true})),
            ),
            (
                bson!({"$setField": {"field": "c", "input": "$sub", "value": "$$REMOVE"}}),
                some(bson!({"a.b": 1})),
            ),
            (
                bson!({"$unsetField": {"field": "a.b", "input": "$sub"}}),
                some(bson!({"c": 2})),
            ),
            (
                bson!({"$unsetField": {"field": "x", "input": null}}),
                some(Bson::Null),
            ),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$getField": "$qty"}), 5654602),
            (
                bson!({"$getField": {"field": "$qty", "input": "$sub"}}),
                5654602,
            ),
            (bson!({"$getField": {"field": 5, "input": "$sub"}}), 5654601),
            (
                bson!({"$getField": {"field": {"$concat": ["a", "$qty"]}, "input": "$sub"}}),
                5654600,
            ),
            (bson!({"$getField": {"input": "$sub"}}), 3041702),
            (bson!({"$getField": {"field": "a"}}), 3041703),
            (
                bson!({"$getField": {"field": "a", "input": "$sub", "x": 1}}),
                3041701,
            ),
            (
                bson!({"$setField": {"field": "a", "input": "$sub"}}),
                4161103,
            ),
            (bson!({"$setField": {"field": "a", "value": 1}}), 4161109),
            (bson!({"$setField": {"input": "$sub", "value": 1}}), 4161102),
            (
                bson!({"$setField": {"field": "a", "input": 1, "value": 1}}),
                4161105,
            ),
            (
                bson!({"$unsetField": {"field": "a", "input": "$sub", "value": 1}}),
                4161101,
            ),
        ],
    );
}

#[test]
fn sort_array_and_zip() {
    let d = doc! {
        "team": [{"name": "pat", "age": 30}, {"name": "dallas", "age": 36}, {"name": "charlie", "age": 42}],
        "nums": [1, "a", 3.5, null, {"x": 1}],
        "matrix": [[1, 2], [3, 4, 5]],
    };
    table(
        &d,
        &[
            (
                bson!({"$sortArray": {"input": "$team", "sortBy": {"name": 1}}}),
                some(
                    bson!([{"name": "charlie", "age": 42}, {"name": "dallas", "age": 36}, {"name": "pat", "age": 30}]),
                ),
            ),
            (
                bson!({"$sortArray": {"input": "$team", "sortBy": {"age": -1}}}),
                some(
                    bson!([{"name": "charlie", "age": 42}, {"name": "dallas", "age": 36}, {"name": "pat", "age": 30}]),
                ),
            ),
            (
                bson!({"$sortArray": {"input": "$nums", "sortBy": 1}}),
                some(bson!([null, 1, 3.5, "a", {"x": 1}])),
            ),
            (
                bson!({"$sortArray": {"input": "$nums", "sortBy": -1}}),
                some(bson!([{"x": 1}, "a", 3.5, 1, null])),
            ),
            (
                bson!({"$sortArray": {"input": "$nope", "sortBy": 1}}),
                some(Bson::Null),
            ),
            (
                bson!({"$zip": {"inputs": [["a", "b"], [1, 2, 3]]}}),
                some(bson!([["a", 1], ["b", 2]])),
            ),
            (
                bson!({"$zip": {"inputs": [["a", "b"], [1, 2, 3]], "useLongestLength": true}}),
                some(bson!([["a", 1], ["b", 2], [null, 3]])),
            ),
            (
                bson!({"$zip": {"inputs": [["a", "b"], [1, 2, 3]], "useLongestLength": true, "defaults": ["z", 0]}}),
                some(bson!([["a", 1], ["b", 2], ["z", 3]])),
            ),
            (
                bson!({"$zip": {"inputs": [{"$arrayElemAt": ["$matrix", 0]}, {"$arrayElemAt": ["$matrix", 1]}]}}),
                some(bson!([[1, 3], [2, 4]])),
            ),
            (
                bson!({"$zip": {"inputs": [[1], "$nope"]}}),
                some(Bson::Null),
            ),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$sortArray": 1}), 2942500),
            (
                bson!({"$sortArray": {"input": "$team", "sortBy": 1, "x": 1}}),
                2942501,
            ),
            (bson!({"$sortArray": {"sortBy": 1}}), 2942502),
            (bson!({"$sortArray": {"input": "$team"}}), 2942503),
            (bson!({"$sortArray": {"input": 1, "sortBy": 1}}), 2942504),
            (
                bson!({"$sortArray": {"input": "$team", "sortBy": 2}}),
                2942506,
            ),
            (
                bson!({"$sortArray": {"input": "$team", "sortBy": "x"}}),
                2942507,
            ),
            (bson!({"$zip": 1}), 34460),
            (bson!({"$zip": {"inputs": 1}}), 34461),
            (
                bson!({"$zip": {"inputs": [[1]], "defaults": 1, "useLongestLength": true}}),
                34462,
            ),
            (
                bson!({"$zip": {"inputs": [[1]], "useLongestLength": 1}}),
                34463,
            ),
            (bson!({"$zip": {"inputs": [[1]], "x": 1}}), 34464),
            (bson!({"$zip": {"inputs": []}}), 34465),
            (bson!({"$zip": {"inputs": [[1]], "defaults": [1]}}), 34466),
            (
                bson!({"$zip": {"inputs": [[1]], "defaults": [1, 2], "useLongestLength": true}}),
                34467,
            ),
            (bson!({"$zip": {"inputs": [[1], 3]}}), 34468),
        ],
    );
}

#[test]
fn bitwise_and_sizes() {
    let d = doc! {"a": 0b1100, "b": 0b1010, "l": Bson::Int64(3), "bin": Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] })};
    table(
        &d,
        &[
            (bson!({"$bitAnd": ["$a", "$b"]}), some(bson!(8))),
            (bson!({"$bitOr": ["$a", "$b"]}), some(bson!(14))),
            (bson!({"$bitXor": ["$a", "$b"]}), some(bson!(6))),
            (bson!({"$bitAnd": ["$a", "$l"]}), some(Bson::Int64(0))),
            (bson!({"$bitOr": []}), some(bson!(0))),
            (bson!({"$bitAnd": []}), some(bson!(-1))),
            (bson!({"$bitNot": "$a"}), some(bson!(-13))),
            (bson!({"$bitNot": "$l"}), some(Bson::Int64(-4))),
            (bson!({"$bitAnd": ["$a", null]}), some(Bson::Null)),
            (
                bson!({"$bsonSize": "$$ROOT"}),
                some(bson!(raw(&d).as_bytes().len() as i32)),
            ),
            (bson!({"$bsonSize": {"a": 1}}), some(bson!(12))),
            (bson!({"$bsonSize": null}), some(Bson::Null)),
            (bson!({"$binarySize": "héllo"}), some(bson!(6))),
            (bson!({"$binarySize": "$bin"}), some(bson!(3))),
            (
                bson!({"$tsSecond": {"$literal": Bson::Timestamp(Timestamp { time: 1_622_731_060, increment: 5 })}}),
                some(Bson::Int64(1_622_731_060)),
            ),
            (
                bson!({"$tsIncrement": {"$literal": Bson::Timestamp(Timestamp { time: 1_622_731_060, increment: 5 })}}),
                some(Bson::Int64(5)),
            ),
            (bson!({"$tsSecond": null}), some(Bson::Null)),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$bitAnd": [1, 1.5]}), 14),
            (bson!({"$bitNot": 1.5}), 14),
            (bson!({"$bitNot": "x"}), 28765),
            (bson!({"$bsonSize": 1}), 31393),
            (bson!({"$binarySize": 1}), 51276),
            (bson!({"$tsSecond": 1}), 5687301),
            (bson!({"$tsIncrement": 1}), 5687302),
        ],
    );
}

#[test]
fn trigonometry() {
    let d = doc! {"side_a": 3, "side_b": 4, "angle_a": 36.87, "deg": 90};
    let close = |expr: Bson, want: f64| match eval(&expr, &d).unwrap() {
        Some(Bson::Double(x)) => assert!((x - want).abs() < 1e-9, "{expr} gave {x}"),
        other => panic!("{expr} gave {other:?}"),
    };
    close(bson!({"$sin": 0}), 0.0);
    close(bson!({"$cos": 0}), 1.0);
    close(
        bson!({"$degreesToRadians": "$deg"}),
        std::f64::consts::FRAC_PI_2,
    );
    close(
        bson!({"$radiansToDegrees": {"$atan2": ["$side_a", "$side_b"]}}),
        36.869_897_645_844_02,
    );
    close(bson!({"$asin": 1}), std::f64::consts::FRAC_PI_2);
    close(bson!({"$acosh": 1}), 0.0);
    close(bson!({"$tanh": 0}), 0.0);
    table(
        &d,
        &[
            (bson!({"$sin": null}), some(Bson::Null)),
            (bson!({"$atan2": [null, 1]}), some(Bson::Null)),
        ],
    );
    match eval(&bson!({"$acos": f64::NAN}), &d).unwrap() {
        Some(Bson::Double(x)) => assert!(x.is_nan()),
        other => panic!("{other:?}"),
    }
    errors(
        &d,
        &[
            (bson!({"$acos": 2}), 50989),
            (bson!({"$asin": -1.5}), 50989),
            (bson!({"$atanh": {"$literal": dec("1.0000000001")}}), 50989),
            (bson!({"$acosh": 0.5}), 50989),
            (bson!({"$sin": f64::INFINITY}), 50989),
            (bson!({"$sin": "x"}), 28765),
            (bson!({"$atan2": ["x", 1]}), 51044),
            (bson!({"$atan2": [1, "x"]}), 51045),
        ],
    );
    let msg = eval(&bson!({"$acos": 2}), &d).unwrap_err().to_string();
    assert_eq!(msg, "cannot apply $acos to 2, value must be in [-1,1]");
}

#[test]
fn misc_operators() {
    let d = doc! {"a": 1};
    // $toHashedIndexKey is the hashed index's key (a long); missing hashes like null.
    let h = eval(&bson!({"$toHashedIndexKey": "sometext"}), &d).unwrap();
    assert!(matches!(h, Some(Bson::Int64(_))));
    assert_eq!(
        eval(&bson!({"$toHashedIndexKey": "$nope"}), &d).unwrap(),
        eval(&bson!({"$toHashedIndexKey": null}), &d).unwrap()
    );
    assert_eq!(
        eval(&bson!({"$toHashedIndexKey": 1}), &d).unwrap(),
        eval(&bson!({"$toHashedIndexKey": 1.0}), &d).unwrap()
    );
    // $rand: a fresh double in [0, 1) on every evaluation, never folded.
    let mut seen = std::collections::HashSet::new();
    for _ in 0..50 {
        match eval(&bson!({"$rand": {}}), &d).unwrap() {
            Some(Bson::Double(x)) => {
                assert!((0.0..1.0).contains(&x));
                seen.insert(x.to_bits());
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(seen.len() > 40);
    // $meta without text search or other metadata is missing.
    table(
        &d,
        &[
            (bson!({"$meta": "textScore"}), None),
            (bson!({"$meta": "searchScore"}), None),
            (bson!({"$literal": "$a"}), some(bson!("$a"))),
        ],
    );
    errors(
        &d,
        &[
            (bson!({"$rand": {"x": 1}}), 3040501),
            (bson!({"$rand": 1}), 10065),
            (bson!({"$meta": 1}), 17307),
            (bson!({"$meta": "nope"}), 17308),
            (bson!({"$meta": "indexKey"}), 238),
            (bson!({"$meta": "randVal"}), 238),
            (bson!({"$meta": "geoNearDistance"}), 238),
            (
                bson!({"$function": {"body": "function(){return 1}", "args": [], "lang": "js"}}),
                31264,
            ),
            (bson!({"$function": {"args": [], "lang": "js"}}), 31261),
            (
                bson!({"$function": {"body": 1, "args": [], "lang": "js"}}),
                31262,
            ),
            (bson!({"$function": {"body": "f", "lang": "js"}}), 31263),
            (
                bson!({"$function": {"body": "f", "args": 1, "lang": "js"}}),
                31266,
            ),
            (bson!({"$function": {"body": "f", "args": []}}), 31418),
            (
                bson!({"$function": {"body": "f", "args": [], "lang": "py"}}),
                31419,
            ),
            (bson!({"$accumulator": {}}), 168),
            (bson!({"$rank": {}}), 238),
        ],
    );
}

#[test]
fn system_variables() {
    let d = doc! {"a": 1};
    table(
        &d,
        &[
            (bson!("$$DESCEND"), some(bson!("descend"))),
            (bson!("$$PRUNE"), some(bson!("prune"))),
            (bson!("$$KEEP"), some(bson!("keep"))),
            (bson!("$$SEARCH_META"), None),
            (
                bson!({"$ifNull": ["$$SEARCH_META", "none"]}),
                some(bson!("none")),
            ),
            (bson!("$$CURRENT.a"), some(bson!(1))),
            (
                bson!({"$let": {"vars": {"CURRENT": {"a": 7}}, "in": "$a"}}),
                some(bson!(7)),
            ),
            (
                bson!("$$NOW"),
                some(Bson::DateTime(DateTime::from_millis(0))),
            ),
        ],
    );
    // $$CLUSTER_TIME comes from the caller; without it, MongoDB's standalone error.
    errors(&d, &[(bson!("$$CLUSTER_TIME"), 51144)]);
    let mut vars = Variables::with_now(DateTime::from_millis(0));
    let ts = Timestamp {
        time: 1_700_000_000,
        increment: 3,
    };
    vars.set_cluster_time(ts);
    assert_eq!(
        eval_with(&bson!("$$CLUSTER_TIME"), &d, &vars).unwrap(),
        Some(Bson::Timestamp(ts))
    );
    assert_eq!(
        eval_with(&bson!({"$tsSecond": "$$CLUSTER_TIME"}), &d, &vars).unwrap(),
        Some(Bson::Int64(1_700_000_000))
    );
}

#[test]
fn sample_rate_filter() {
    use cairn_query::filter::Filter;
    let parse = |v: Bson| Filter::parse(&raw(&doc! {"$sampleRate": v}));
    let doc = raw(&doc! {"a": 1});
    let never = parse(bson!(0)).expect("parses");
    let always = parse(bson!(1.0)).expect("parses");
    let half = parse(bson!(0.5)).expect("parses");
    let hits = (0..2000).filter(|_| half.matches(&doc)).count();
    assert!((800..1200).contains(&hits), "{hits} of 2000");
    assert!((0..100).all(|_| !never.matches(&doc) && always.matches(&doc)));
    assert_eq!(code(&parse(bson!("x")).unwrap_err()), 14);
    assert_eq!(code(&parse(bson!(1.5)).unwrap_err()), 2);
    assert_eq!(code(&parse(bson!(-0.1)).unwrap_err()), 2);
}
