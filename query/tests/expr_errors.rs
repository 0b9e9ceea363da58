//! Aggregation expressions: parse and evaluation errors by MongoDB code and message.

use bson::{Bson, DateTime, Document, RawDocumentBuf, bson, doc};
use cairn_query::QueryError;
use cairn_query::expr::{Expression, ParseContext, Variables};

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("encodable")
}

fn code(e: &QueryError) -> i32 {
    match e {
        QueryError::BadValue(_) => 2,
        QueryError::FailedToParse(_) => 9,
        QueryError::TypeMismatch(_) => 14,
        QueryError::DollarPrefixedFieldName(_) => 52,
        QueryError::InvalidIdField(_) => 53,
        QueryError::NotImplemented(_) => 238,
        QueryError::Location(c, _) => *c,
        QueryError::Storage(_) => -1,
    }
}

fn parse(expr: &Bson) -> Result<Expression, QueryError> {
    let holder = raw(&doc! {"e": expr.clone()});
    let v = holder.get("e").expect("readable").expect("present");
    Expression::parse(v, &ParseContext::new())
}

/// A parse-time error (constant folding included).
#[track_caller]
fn parse_err(expr: Bson, want_code: i32, want_msg: &str) {
    let e = parse(&expr).expect_err(&format!("{expr} should not parse"));
    assert_eq!(
        (code(&e), e.to_string().as_str()),
        (want_code, want_msg),
        "{expr}"
    );
}

/// An evaluation error on `input` (the expression parses).
#[track_caller]
fn eval_err(expr: Bson, input: Document, want_code: i32, want_msg: &str) {
    let e = parse(&expr).unwrap_or_else(|e| panic!("{expr}: {e:?}"));
    let err = e
        .evaluate(&raw(&input), &Variables::with_now(DateTime::from_millis(0)))
        .expect_err(&format!("{expr} on {input} should fail"));
    assert_eq!(
        (code(&err), err.to_string().as_str()),
        (want_code, want_msg),
        "{expr} on {input}"
    );
}

#[test]
fn parse_errors() {
    parse_err(bson!({"$foo": 1}), 168, "Unrecognized expression '$foo'");
    parse_err(
        bson!({"$dateAdd": {}}),
        5166402,
        "$dateAdd requires startDate, unit, and amount to be present",
    );
    parse_err(
        bson!({"$shift": {"output": "$a", "by": 1}}),
        238,
        "the aggregation expression $shift is not supported yet",
    );
    parse_err(
        bson!({"$add": [1], "$sub": 2}),
        15983,
        "An object representing an expression must have exactly one field: { $add: [ 1 ], \
         $sub: 2 }",
    );
    parse_err(
        bson!({"$subtract": [1]}),
        16020,
        "Expression $subtract takes exactly 2 arguments. 1 were passed in.",
    );
    parse_err(
        bson!({"$cond": [1, 2]}),
        16020,
        "Expression $cond takes exactly 3 arguments. 2 were passed in.",
    );
    parse_err(
        bson!({"$abs": [1, 2]}),
        16020,
        "Expression $abs takes exactly 1 arguments. 2 were passed in.",
    );
    parse_err(
        bson!({"$round": []}),
        28667,
        "Expression $round takes at least 1 arguments, and at most 2, but 0 were passed in.",
    );
    parse_err(
        bson!({"$ifNull": ["$a"]}),
        1257300,
        "$ifNull needs at least two arguments, had: 1",
    );
    parse_err(
        bson!({"$toInt": [1, 2]}),
        50723,
        "$toInt requires a single argument, got 2",
    );
    parse_err(bson!("$"), 16872, "'$' by itself is not a valid FieldPath");
    parse_err(
        bson!("$a..b"),
        15998,
        "FieldPath field names may not be empty strings.",
    );
    parse_err(bson!("$a."), 40353, "FieldPath must not end with a '.'.");
    parse_err(bson!("$$"), 9, "empty variable names are not allowed");
    parse_err(
        bson!("$$_x"),
        9,
        "'_x' starts with an invalid character for a user variable name",
    );
    parse_err(
        bson!("$$a-b"),
        9,
        "'a-b' contains an invalid character for a variable name: '-'",
    );
    parse_err(
        bson!("$$unbound"),
        17276,
        "Use of undefined variable: unbound",
    );
    parse_err(bson!("$$FOO"), 17276, "Use of undefined variable: FOO");
    parse_err(
        bson!({"$let": {"vars": {"Up": 1}, "in": 1}}),
        9,
        "'Up' starts with an invalid character for a user variable name",
    );
    parse_err(
        bson!({"$let": {"vars": {"x": 1}}}),
        16877,
        "Missing 'in' parameter to $let",
    );
    parse_err(
        bson!({"$cond": {"if": true, "else": 1}}),
        17081,
        "Missing 'then' parameter to $cond",
    );
    parse_err(
        bson!({"$cond": {"if": true, "then": 1, "else": 2, "x": 3}}),
        17083,
        "Unrecognized parameter to $cond: x",
    );
    parse_err(
        bson!({"$switch": {"branches": []}}),
        40068,
        "$switch requires at least one branch.",
    );
    parse_err(
        bson!({"$switch": {"branches": [{"case": true}]}}),
        40065,
        "$switch requires each branch have a 'then' expression.",
    );
    parse_err(
        bson!({"$switch": {"branches": [{"case": false, "then": 1}]}}),
        40069,
        "One cannot execute a switch statement where all the cases evaluate to false without \
         a default.",
    );
    parse_err(
        bson!({"a": 1, "$b": 2}),
        16410,
        "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
    );
    parse_err(
        bson!({"$map": {"input": [], "as": "", "in": 1}}),
        9,
        "empty variable names are not allowed",
    );
    parse_err(
        bson!({"$convert": {"input": 1}}),
        9,
        "Missing 'to' parameter to $convert",
    );
}

#[test]
fn duplicate_fields() {
    let mut obj = RawDocumentBuf::new();
    obj.append(bson::raw::cstr!("a"), 1);
    obj.append(bson::raw::cstr!("a"), 2);
    let e = Expression::parse(bson::RawBsonRef::Document(&obj), &ParseContext::new())
        .expect_err("duplicate");
    assert_eq!(code(&e), 16406);
    assert_eq!(
        e.to_string(),
        "duplicate field name specified in object literal: { a: 1, a: 2 }"
    );
}

#[test]
fn constant_folding_reports_at_parse_time() {
    // MongoDB folds constants when optimizing, so these fail before any document is seen.
    parse_err(bson!({"$divide": [1, 0]}), 2, "can't $divide by zero");
    parse_err(
        bson!({"$add": [1, "x"]}),
        14,
        "$add only supports numeric or date types, not string",
    );
    // Even in a branch that is never taken.
    parse_err(
        bson!({"$cond": [{"$eq": ["$a", 1]}, {"$divide": [1, 0]}, 2]}),
        2,
        "can't $divide by zero",
    );
    // But a false constant at the end of $and short-circuits a non-constant division.
    let e = parse(&bson!({"$and": [{"$divide": [1, "$a"]}, false]})).expect("parses");
    let v = e
        .evaluate(&raw(&doc! {"a": 0}), &Variables::new())
        .expect("no division happens");
    assert_eq!(v, Some(bson::RawBson::Boolean(false)));
    // $cond with a constant condition keeps only the chosen branch.
    let e = parse(&bson!({"$cond": [true, 1, {"$divide": [1, "$a"]}]})).expect("parses");
    assert!(e.constant().is_some());
}

#[test]
fn evaluation_errors() {
    eval_err(
        bson!({"$divide": [1, "$a"]}),
        doc! {"a": 0},
        2,
        "can't $divide by zero",
    );
    eval_err(
        bson!({"$divide": ["$a", "x"]}),
        doc! {"a": 1},
        14,
        "$divide only supports numeric types, not int and string",
    );
    eval_err(
        bson!({"$add": ["$a", 1]}),
        doc! {"a": "x"},
        14,
        "$add only supports numeric or date types, not string",
    );
    eval_err(
        bson!({"$add": ["$a", "$a"]}),
        doc! {"a": DateTime::from_millis(0)},
        16612,
        "only one date allowed in an $add expression",
    );
    eval_err(
        bson!({"$multiply": ["$a", 2]}),
        doc! {"a": [1]},
        14,
        "$multiply only supports numeric types, not array",
    );
    eval_err(
        bson!({"$subtract": ["$a", "$b"]}),
        doc! {"a": 1, "b": DateTime::from_millis(0)},
        14,
        "can't $subtract date from int",
    );
    eval_err(
        bson!({"$subtract": ["$a", "x"]}),
        doc! {"a": DateTime::from_millis(0)},
        14,
        "can't $subtract string from Date",
    );
    eval_err(
        bson!({"$mod": ["$a", 0]}),
        doc! {"a": 5},
        16610,
        "can't $mod by zero",
    );
    eval_err(
        bson!({"$mod": ["$a", "x"]}),
        doc! {"a": 5},
        16611,
        "$mod only supports numeric types, not int and string",
    );
    eval_err(
        bson!({"$abs": "$a"}),
        doc! {"a": Bson::Int64(i64::MIN)},
        28680,
        "can't take $abs of long long min",
    );
    eval_err(
        bson!({"$abs": "$a"}),
        doc! {"a": "x"},
        28765,
        "$abs only supports numeric types, not string",
    );
    eval_err(
        bson!({"$sqrt": "$a"}),
        doc! {"a": -1},
        28714,
        "$sqrt's argument must be greater than or equal to 0",
    );
    eval_err(
        bson!({"$ln": "$a"}),
        doc! {"a": 0},
        28766,
        "$ln's argument must be a positive number, but is 0",
    );
    eval_err(
        bson!({"$log": ["$a", 1]}),
        doc! {"a": 10},
        28759,
        "$log's base must be a positive number not equal to 1, but is 1",
    );
    eval_err(
        bson!({"$log10": "$a"}),
        doc! {"a": -2.5},
        28761,
        "$log10's argument must be a positive number, but is -2.5",
    );
    eval_err(
        bson!({"$pow": [0, "$a"]}),
        doc! {"a": -1},
        28764,
        "$pow cannot take a base of 0 and a negative exponent",
    );
    eval_err(
        bson!({"$round": ["$a", 101]}),
        doc! {"a": 1.5},
        51083,
        "cannot apply $round with precision value 101 value must be in [-20, 100]",
    );
    eval_err(
        bson!({"$round": ["$a", 1.5]}),
        doc! {"a": 1.5},
        51082,
        "precision argument to  $round must be a integral value",
    );
    eval_err(
        bson!({"$size": "$a"}),
        doc! {},
        17124,
        "The argument to $size must be an array, but was of type: missing",
    );
    eval_err(
        bson!({"$in": [1, "$a"]}),
        doc! {"a": 1},
        40081,
        "$in requires an array as a second argument, found: int",
    );
    eval_err(
        bson!({"$arrayElemAt": ["$a", 1.5]}),
        doc! {"a": [1, 2]},
        28691,
        "$arrayElemAt's second argument must be representable as a 32-bit integer: 1.5",
    );
    eval_err(
        bson!({"$arrayElemAt": ["$a", 0]}),
        doc! {"a": "x"},
        28689,
        "$arrayElemAt's first argument must be an array, but is string",
    );
    eval_err(
        bson!({"$concat": ["$a", 1]}),
        doc! {"a": "x"},
        16702,
        "$concat only supports strings, not int",
    );
    eval_err(
        bson!({"$toUpper": "$a"}),
        doc! {"a": [1]},
        16007,
        "can't convert from BSON type array to String",
    );
    eval_err(
        bson!({"$strLenCP": "$a"}),
        doc! {},
        34471,
        "$strLenCP requires a string argument, found: missing",
    );
    eval_err(
        bson!({"$switch": {"branches": [{"case": "$a", "then": 1}]}}),
        doc! {"a": 0},
        40066,
        "$switch could not find a matching branch for an input, and no default was specified.",
    );
    eval_err(
        bson!({"$toInt": "$a"}),
        doc! {"a": "abc"},
        241,
        "Failed to parse number 'abc' in $convert with no onError value: Did not consume whole \
         string.",
    );
    eval_err(
        bson!({"$toInt": "$a"}),
        doc! {"a": 1e10},
        241,
        "Conversion would overflow target type in $convert with no onError value: 1e+10",
    );
    eval_err(
        bson!({"$toInt": "$a"}),
        doc! {"a": f64::NAN},
        241,
        "Attempt to convert NaN value to integer type in $convert with no onError value",
    );
    eval_err(
        bson!({"$convert": {"input": "$a", "to": "date"}}),
        doc! {"a": 1},
        241,
        "Unsupported conversion from int to date in $convert with no onError value",
    );
    eval_err(
        bson!({"$convert": {"input": "$a", "to": "foo"}}),
        doc! {"a": 1},
        2,
        "Unknown type name: foo",
    );
    eval_err(
        bson!({"$map": {"input": "$a", "in": 1}}),
        doc! {"a": 1},
        16883,
        "input to $map must be an array not int",
    );
}

#[test]
fn user_variables() {
    let mut vars = Variables::new();
    vars.set("rate", Bson::Double(0.5).try_into().expect("raw"))
        .expect("valid name");
    assert_eq!(
        vars.set("Bad", bson::RawBson::Null).map_err(|e| code(&e)),
        Err(9)
    );
    let ctx = ParseContext::for_variables(&vars);
    let holder = raw(&doc! {"e": {"$multiply": ["$x", "$$rate"]}});
    let e = Expression::parse(holder.get("e").expect("ok").expect("some"), &ctx).expect("parses");
    let v = e.evaluate(&raw(&doc! {"x": 4}), &vars).expect("evaluates");
    assert_eq!(v, Some(bson::RawBson::Double(2.0)));
    // Evaluated without the variable's value: 17276.
    let err = e
        .evaluate(&raw(&doc! {"x": 4}), &Variables::new())
        .expect_err("undefined");
    assert_eq!(code(&err), 17276);
}

#[test]
fn nesting_is_bounded() {
    /// `{$add: [{$add: [… "$x" …, 1]}, 1]}` built without recursion.
    fn nested(depth: usize) -> RawDocumentBuf {
        let mut inner = bson::RawBson::String("$x".into());
        for _ in 0..depth {
            let mut args = bson::RawArrayBuf::new();
            args.push(inner);
            args.push(1);
            let mut d = RawDocumentBuf::new();
            d.append(bson::raw::cstr!("$add"), args);
            inner = bson::RawBson::Document(d);
        }
        let mut holder = RawDocumentBuf::new();
        holder.append(bson::raw::cstr!("e"), inner);
        holder
    }
    let parse_raw = |h: &RawDocumentBuf| {
        Expression::parse(h.get("e").expect("ok").expect("some"), &ParseContext::new())
    };
    let e = parse_raw(&nested(140)).expect("deep but allowed");
    let v = e
        .evaluate(&raw(&doc! {"x": 1}), &Variables::new())
        .expect("evaluates");
    assert_eq!(v, Some(bson::RawBson::Int32(141)));
    let err = parse_raw(&nested(5000)).expect_err("too deep");
    assert_eq!(code(&err), 15);
}
