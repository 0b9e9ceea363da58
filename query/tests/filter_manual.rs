//! The examples of the MongoDB 7.0 manual's query operator pages, with their documented
//! results (collections abridged to the fields the examples use).

mod common;

use bson::{Bson, bson};
use common::*;

#[test]
fn eq() {
    let inventory = vec![
        bson!({"_id": 1, "item": {"name": "ab", "code": "123"}, "qty": 15, "tags": ["A", "B", "C"]}),
        bson!({"_id": 2, "item": {"name": "cd", "code": "123"}, "qty": 20, "tags": ["B"]}),
        bson!({"_id": 3, "item": {"name": "ij", "code": "456"}, "qty": 25, "tags": ["A", "B"]}),
        bson!({"_id": 4, "item": {"name": "xy", "code": "456"}, "qty": 30, "tags": ["B", "A"]}),
        bson!({"_id": 5, "item": {"name": "mn", "code": "000"}, "qty": 20, "tags": [["A", "B"], "C"]}),
    ];
    expect(&inventory, bson!({"qty": {"$eq": 20}}), &["2", "5"]);
    expect(&inventory, bson!({"qty": 20}), &["2", "5"]);
    expect(&inventory, bson!({"item.name": {"$eq": "ab"}}), &["1"]);
    expect(
        &inventory,
        bson!({"tags": {"$eq": "B"}}),
        &["1", "2", "3", "4"],
    );
    expect(
        &inventory,
        bson!({"tags": {"$eq": ["A", "B"]}}),
        &["3", "5"],
    );
    expect(&inventory, bson!({"tags": ["A", "B"]}), &["3", "5"]);

    let companies = vec![
        bson!({"_id": 1, "company": "MongoDB"}),
        bson!({"_id": 2, "company": "MongoDB2"}),
    ];
    expect(&companies, bson!({"company": "MongoDB"}), &["1"]);
    expect(&companies, bson!({"company": {"$eq": "MongoDB"}}), &["1"]);
    expect(
        &companies,
        bson!({"company": {"$eq": (re("MongoDB", ""))}}),
        &[],
    );
    expect(
        &companies,
        bson!({"company": (re("MongoDB", ""))}),
        &["1", "2"],
    );
    expect(
        &companies,
        bson!({"company": {"$regex": (re("MongoDB", ""))}}),
        &["1", "2"],
    );
}

fn carriers() -> Vec<Bson> {
    vec![
        bson!({"_id": "nuts", "quantity": 30, "carrier": {"name": "Shipit", "fee": 3}}),
        bson!({"_id": "bolts", "quantity": 50, "carrier": {"name": "Shipit", "fee": 4}}),
        bson!({"_id": "washers", "quantity": 10, "carrier": {"name": "Shipit", "fee": 1}}),
    ]
}

#[test]
fn ordering_comparisons() {
    let inv = carriers();
    expect(&inv, bson!({"quantity": {"$gt": 20}}), &["nuts", "bolts"]);
    expect(&inv, bson!({"quantity": {"$gte": 20}}), &["nuts", "bolts"]);
    expect(&inv, bson!({"quantity": {"$lt": 20}}), &["washers"]);
    expect(&inv, bson!({"quantity": {"$lte": 20}}), &["washers"]);
    expect(&inv, bson!({"carrier.fee": {"$gt": 2}}), &["nuts", "bolts"]);
    expect(
        &inv,
        bson!({"carrier.fee": {"$lte": 3}}),
        &["nuts", "washers"],
    );
    expect(
        &inv,
        bson!({"quantity": {"$ne": 20}}),
        &["nuts", "bolts", "washers"],
    );
    expect(&inv, bson!({"carrier.fee": {"$ne": 1}}), &["nuts", "bolts"]);
    // Type bracketing: a string bound never matches numbers.
    expect(&inv, bson!({"quantity": {"$gt": "10"}}), &[]);
}

fn tagged() -> Vec<Bson> {
    vec![
        bson!({"_id": "Pens", "quantity": 350, "tags": ["school", "office"]}),
        bson!({"_id": "Erasers", "quantity": 15, "tags": ["school", "home"]}),
        bson!({"_id": "Maps", "tags": ["office", "storage"]}),
        bson!({"_id": "Books", "quantity": 5, "tags": ["school", "storage", "home"]}),
    ]
}

#[test]
fn in_and_nin() {
    let inv = tagged();
    expect(
        &inv,
        bson!({"quantity": {"$in": [5, 15]}}),
        &["Erasers", "Books"],
    );
    expect(
        &inv,
        bson!({"tags": {"$in": [(re("^be", "")), (re("^st", ""))]}}),
        &["Maps", "Books"],
    );
    expect(
        &inv,
        bson!({"tags": {"$in": ["home", "school"]}}),
        &["Pens", "Erasers", "Books"],
    );
    expect(
        &inv,
        bson!({"quantity": {"$nin": [5, 15]}}),
        &["Pens", "Maps"],
    );
    expect(&inv, bson!({"tags": {"$nin": ["school"]}}), &["Maps"]);
    expect(&inv, bson!({"quantity": {"$in": []}}), &[]);
    expect(
        &inv,
        bson!({"quantity": {"$nin": []}}),
        &["Pens", "Erasers", "Maps", "Books"],
    );
}

#[test]
fn logical() {
    let inv = vec![
        bson!({"_id": 1, "price": 1.99, "qty": 5, "sale": true}),
        bson!({"_id": 2, "price": 1.99, "qty": 25, "sale": false}),
        bson!({"_id": 3, "price": 2.99, "qty": 15, "sale": true}),
        bson!({"_id": 4, "price": 3.99, "sale": false}),
        bson!({"_id": 5, "qty": 30}),
        bson!({"_id": 6, "price": "1.99"}),
    ];
    // $and with an explicit array and the implicit form.
    expect(
        &inv,
        bson!({"$and": [{"price": {"$ne": 1.99}}, {"price": {"$exists": true}}]}),
        &["3", "4", "6"],
    );
    expect(
        &inv,
        bson!({"price": {"$ne": 1.99, "$exists": true}}),
        &["3", "4", "6"],
    );
    expect(
        &inv,
        bson!({"$and": [
            {"$or": [{"qty": {"$lt": 10}}, {"qty": {"$gt": 50}}]},
            {"$or": [{"sale": true}, {"price": {"$lt": 5}}]}
        ]}),
        &["1"],
    );
    expect(
        &inv,
        bson!({"$or": [{"qty": {"$lt": 20}}, {"price": 2.99}]}),
        &["1", "3"],
    );
    // $nor: neither price 1.99 nor on sale, missing fields included.
    expect(
        &inv,
        bson!({"$nor": [{"price": 1.99}, {"sale": true}]}),
        &["4", "5", "6"],
    );
    expect(
        &inv,
        bson!({"$nor": [{"price": 1.99}, {"qty": {"$lt": 20}}, {"sale": true}]}),
        &["4", "5", "6"],
    );
    // $not: price not greater than 1.99 — includes missing and non-numeric prices.
    expect(
        &inv,
        bson!({"price": {"$not": {"$gt": 1.99}}}),
        &["1", "2", "5", "6"],
    );
    expect(&inv, bson!({"price": {"$lte": 1.99}}), &["1", "2"]);
    let items = vec![
        bson!({"_id": 1, "item": "p1"}),
        bson!({"_id": 2, "item": "coffee"}),
        bson!({"_id": 3}),
    ];
    expect(
        &items,
        bson!({"item": {"$not": (re("^p.*", ""))}}),
        &["2", "3"],
    );
    expect(
        &items,
        bson!({"item": {"$not": {"$regex": "^p.*"}}}),
        &["2", "3"],
    );
    expect(
        &items,
        bson!({"item": {"$not": {"$regex": (re("^p.*", ""))}}}),
        &["2", "3"],
    );
}

#[test]
fn exists() {
    let spices = vec![
        bson!({"_id": 1, "saffron": 5, "cinnamon": 5, "mustard": null}),
        bson!({"_id": 2, "saffron": 3, "cinnamon": null, "mustard": 8}),
        bson!({"_id": 3, "saffron": null, "cinnamon": 3, "mustard": 9}),
        bson!({"_id": 4, "saffron": 1, "cinnamon": 2, "mustard": 3}),
        bson!({"_id": 5, "saffron": 2, "mustard": 5}),
        bson!({"_id": 6, "saffron": 3, "cinnamon": 2}),
        bson!({"_id": 7, "saffron": 4}),
        bson!({"_id": 8, "cinnamon": 2, "mustard": 4}),
        bson!({"_id": 9, "cinnamon": 2}),
        bson!({"_id": 10, "mustard": 6}),
    ];
    expect(
        &spices,
        bson!({"saffron": {"$exists": true}}),
        &["1", "2", "3", "4", "5", "6", "7"],
    );
    expect(
        &spices,
        bson!({"cinnamon": {"$exists": false}}),
        &["5", "7", "10"],
    );
    expect(
        &spices,
        bson!({"cinnamon": {"$exists": 1}}),
        &["1", "2", "3", "4", "6", "8", "9"],
    );
    expect(
        &spices,
        bson!({"cinnamon": {"$exists": 0}}),
        &["5", "7", "10"],
    );
    expect(
        &spices,
        bson!({"cinnamon": {"$exists": null}}),
        &["5", "7", "10"],
    );
    expect(
        &spices,
        bson!({"cinnamon": {"$exists": "false"}}),
        &["1", "2", "3", "4", "6", "8", "9"],
    );
    expect(
        &spices,
        bson!({"saffron": {"$exists": true, "$nin": [5, 15]}}),
        &["2", "3", "4", "5", "6", "7"],
    );
}

#[test]
fn type_operator() {
    let address_book = vec![
        bson!({"_id": 1, "zipCode": "90698345"}),
        bson!({"_id": 2, "zipCode": 43339374.0}),
        bson!({"_id": 3, "zipCode": (l(3921412))}),
        bson!({"_id": 4, "zipCode": 88602117}),
        bson!({"_id": 5, "zipCode": ["834847278", "1893289032"]}),
    ];
    expect(&address_book, bson!({"zipCode": {"$type": 2}}), &["1", "5"]);
    expect(
        &address_book,
        bson!({"zipCode": {"$type": "string"}}),
        &["1", "5"],
    );
    expect(&address_book, bson!({"zipCode": {"$type": 1}}), &["2"]);
    expect(
        &address_book,
        bson!({"zipCode": {"$type": "double"}}),
        &["2"],
    );
    expect(
        &address_book,
        bson!({"zipCode": {"$type": "number"}}),
        &["2", "3", "4"],
    );
    expect(&address_book, bson!({"zipCode": {"$type": "long"}}), &["3"]);
    expect(
        &address_book,
        bson!({"zipCode": {"$type": ["int", "long"]}}),
        &["3", "4"],
    );

    let grades = vec![
        bson!({"_id": 1, "classAverage": 87.333_333_333_333_33}),
        bson!({"_id": 2, "classAverage": "83.52"}),
        bson!({"_id": 3, "classAverage": "94.06"}),
        bson!({"_id": 4, "classAverage": 93}),
    ];
    expect(
        &grades,
        bson!({"classAverage": {"$type": [2, 1]}}),
        &["1", "2", "3"],
    );
    expect(
        &grades,
        bson!({"classAverage": {"$type": ["string", "double"]}}),
        &["1", "2", "3"],
    );

    let restaurants = vec![
        bson!({"_id": 1, "grades": [{"grade": "A", "score": 5}, {"grade": "A", "score": 7}]}),
        bson!({"_id": 2, "grades": [{"grade": (Bson::MinKey), "score": 6}, {"grade": "B", "score": 4}]}),
        bson!({"_id": 3, "grades": [{"grade": (Bson::MaxKey), "score": 4}]}),
    ];
    expect(
        &restaurants,
        bson!({"grades.grade": {"$type": "minKey"}}),
        &["2"],
    );
    expect(&restaurants, bson!({"grades.grade": {"$type": -1}}), &["2"]);
    expect(
        &restaurants,
        bson!({"grades.grade": {"$type": "maxKey"}}),
        &["3"],
    );
    expect(
        &restaurants,
        bson!({"grades.grade": {"$type": 127}}),
        &["3"],
    );

    let sensor = vec![
        bson!({"_id": 1, "readings": [25, 23, ["Warn: High Temp!", 55], ["ERROR: SYSTEM SHUTDOWN!", 66]]}),
        bson!({"_id": 2, "readings": [25, 25, 24, 23]}),
        bson!({"_id": 3, "readings": [22, 24, []]}),
        bson!({"_id": 4, "readings": []}),
        bson!({"_id": 5, "readings": 24}),
    ];
    expect(
        &sensor,
        bson!({"readings": {"$type": "array"}}),
        &["1", "2", "3", "4"],
    );
    expect(
        &sensor,
        bson!({"readings": {"$type": 4}}),
        &["1", "2", "3", "4"],
    );
}

#[test]
fn mod_operator() {
    let inv = vec![
        bson!({"_id": 1, "qty": 0}),
        bson!({"_id": 2, "qty": 5}),
        bson!({"_id": 3, "qty": 12}),
    ];
    expect(&inv, bson!({"qty": {"$mod": [4, 0]}}), &["1", "3"]);
    let floats = vec![
        bson!({"_id": 1, "qty": 0.0}),
        bson!({"_id": 2, "qty": 5.0}),
        bson!({"_id": 3, "qty": 12.0}),
        bson!({"_id": 4, "qty": 7.0}),
    ];
    expect(&floats, bson!({"qty": {"$mod": [4.0, 0]}}), &["1", "3"]);
    expect(&floats, bson!({"qty": {"$mod": [4.5, 0]}}), &["1", "3"]);
    expect(&floats, bson!({"qty": {"$mod": [4.99, 0]}}), &["1", "3"]);
    expect(&floats, bson!({"qty": {"$mod": [-4, 0]}}), &["1", "3"]);
    expect(&floats, bson!({"qty": {"$mod": [-4.44, 0]}}), &["1", "3"]);
    expect(&floats, bson!({"qty": {"$mod": [-4.99, 0]}}), &["1", "3"]);
    let negative = vec![bson!({"_id": 1, "qty": -13}), bson!({"_id": 2, "qty": 13})];
    // Truncated division: the remainder takes the dividend's sign.
    expect(&negative, bson!({"qty": {"$mod": [5, -3]}}), &["1"]);
    expect(&negative, bson!({"qty": {"$mod": [-5, 3]}}), &["2"]);
    expect_err(bson!({"qty": {"$mod": [4]}}), 2);
    expect_err(bson!({"qty": {"$mod": [4, 1, 2]}}), 2);
    expect_err(bson!({"qty": {"$mod": []}}), 2);
    expect_err(bson!({"qty": {"$mod": [0, 1]}}), 2);
}

fn products() -> Vec<Bson> {
    vec![
        bson!({"_id": 100, "sku": "abc123", "description": "Single line description."}),
        bson!({"_id": 101, "sku": "abc789", "description": "First line\nSecond line"}),
        bson!({"_id": 102, "sku": "xyz456", "description": "Many spaces before     line"}),
        bson!({"_id": 103, "sku": "xyz789", "description": "Multiple\nline description"}),
        bson!({"_id": 104, "sku": "Abc789", "description": "SKU starts with A"}),
    ]
}

#[test]
fn regex() {
    let p = products();
    expect(
        &p,
        bson!({"sku": {"$regex": (re("789$", ""))}}),
        &["101", "103", "104"],
    );
    expect(
        &p,
        bson!({"sku": {"$regex": "789$"}}),
        &["101", "103", "104"],
    );
    expect(&p, bson!({"sku": (re("789$", ""))}), &["101", "103", "104"]);
    expect(
        &p,
        bson!({"sku": {"$regex": (re("^ABC", "i"))}}),
        &["100", "101", "104"],
    );
    expect(
        &p,
        bson!({"sku": {"$regex": "^ABC", "$options": "i"}}),
        &["100", "101", "104"],
    );
    expect(
        &p,
        bson!({"sku": {"$options": "i", "$regex": "^ABC"}}),
        &["100", "101", "104"],
    );
    expect(
        &p,
        bson!({"description": {"$regex": (re("^S", "m"))}}),
        &["100", "101", "104"],
    );
    expect(
        &p,
        bson!({"description": {"$regex": (re("^S", ""))}}),
        &["100", "104"],
    );
    expect(
        &p,
        bson!({"description": {"$regex": (re("m.*line", "si"))}}),
        &["102", "103"],
    );
    expect(
        &p,
        bson!({"description": {"$regex": (re("m.*line", "i"))}}),
        &["102"],
    );
    expect(
        &p,
        bson!({"sku": {"$regex": "abc #category code\n123 #item number", "$options": "x"}}),
        &["100"],
    );
    expect(
        &p,
        bson!({"sku": {"$in": [(re("^abc", "i")), (re("^xyz", ""))]}}),
        &["100", "101", "102", "103", "104"],
    );
    expect(
        &p,
        bson!({"sku": {"$not": (re("^a", "i"))}}),
        &["102", "103"],
    );
    // Regex values themselves: matched by `$eq`, and by a regex with the same pattern and flags.
    let rx = vec![
        bson!({"_id": 1, "r": (re("a.c", "i"))}),
        bson!({"_id": 2, "r": "abc"}),
    ];
    expect(&rx, bson!({"r": {"$eq": (re("a.c", "i"))}}), &["1"]);
    expect(&rx, bson!({"r": (re("a.c", "i"))}), &["1", "2"]);
    expect(&rx, bson!({"r": (re("a.c", ""))}), &["2"]);
    expect(&rx, bson!({"r": {"$in": [(re("a.c", "i"))]}}), &["1", "2"]);
}

fn all_inventory() -> Vec<Bson> {
    vec![
        bson!({"_id": 675, "code": "xyz", "tags": ["school", "book", "bag", "headphone", "appliance"],
            "qty": [{"size": "S", "num": 10, "color": "blue"}, {"size": "M", "num": 45, "color": "blue"},
                    {"size": "L", "num": 100, "color": "green"}]}),
        bson!({"_id": 676, "code": "abc", "tags": ["appliance", "school", "book"],
            "qty": [{"size": "6", "num": 100, "color": "green"}, {"size": "6", "num": 50, "color": "blue"},
                    {"size": "8", "num": 100, "color": "brown"}]}),
        bson!({"_id": 677, "code": "efg", "tags": ["school", "book"],
            "qty": [{"size": "S", "num": 10, "color": "blue"}, {"size": "M", "num": 100, "color": "blue"},
                    {"size": "L", "num": 100, "color": "green"}]}),
        bson!({"_id": 678, "code": "ijk", "tags": ["electronics", "school"],
            "qty": [{"size": "M", "num": 100, "color": "green"}]}),
    ]
}

#[test]
fn all() {
    let inv = all_inventory();
    expect(
        &inv,
        bson!({"tags": {"$all": ["appliance", "school", "book"]}}),
        &["675", "676"],
    );
    expect(
        &inv,
        bson!({"qty": {"$all": [
            {"$elemMatch": {"size": "M", "num": {"$gt": 50}}},
            {"$elemMatch": {"num": 100, "color": "green"}}
        ]}}),
        &["677", "678"],
    );
    expect(&inv, bson!({"qty.num": {"$all": [50]}}), &["676"]);
    expect(&inv, bson!({"qty.num": 50}), &["676"]);
    expect(&inv, bson!({"tags": {"$all": []}}), &[]);
    expect(
        &inv,
        bson!({"tags": {"$all": [(re("^head", ""))]}}),
        &["675"],
    );
    // A single nested array: {$all: [[x]]} is equality with [x].
    let nested = vec![
        bson!({"_id": 1, "a": ["x"]}),
        bson!({"_id": 2, "a": [["x"]]}),
        bson!({"_id": 3, "a": "x"}),
    ];
    expect(&nested, bson!({"a": {"$all": [["x"]]}}), &["1", "2"]);
    expect(&nested, bson!({"a": {"$all": ["x"]}}), &["1", "3"]);
}

#[test]
fn elem_match() {
    let scores = vec![
        bson!({"_id": 1, "results": [82, 85, 88]}),
        bson!({"_id": 2, "results": [75, 88, 89]}),
    ];
    expect(
        &scores,
        bson!({"results": {"$elemMatch": {"$gte": 80, "$lt": 85}}}),
        &["1"],
    );
    // Without $elemMatch the two bounds may be met by different elements.
    expect(
        &scores,
        bson!({"results": {"$gte": 80, "$lt": 85}}),
        &["1", "2"],
    );

    let survey = vec![
        bson!({"_id": 1, "results": [{"product": "abc", "score": 10}, {"product": "xyz", "score": 5}]}),
        bson!({"_id": 2, "results": [{"product": "abc", "score": 8}, {"product": "xyz", "score": 7}]}),
        bson!({"_id": 3, "results": [{"product": "abc", "score": 7}, {"product": "xyz", "score": 8}]}),
        bson!({"_id": 4, "results": [{"product": "abc", "score": 7}, {"product": "def", "score": 8}]}),
        bson!({"_id": 5, "results": {"product": "xyz", "score": 7}}),
    ];
    expect(
        &survey,
        bson!({"results": {"$elemMatch": {"product": "xyz", "score": {"$gte": 8}}}}),
        &["3"],
    );
    expect(
        &survey,
        bson!({"results": {"$elemMatch": {"product": "xyz"}}}),
        &["1", "2", "3"],
    );
    expect(
        &survey,
        bson!({"results.product": "xyz"}),
        &["1", "2", "3", "5"],
    );
    expect(
        &survey,
        bson!({"results": {"$elemMatch": {"product": {"$ne": "xyz"}}}}),
        &["1", "2", "3", "4"],
    );
    expect(&survey, bson!({"results.product": {"$ne": "xyz"}}), &["4"]);
    expect(
        &survey,
        bson!({"results": {"$elemMatch": {"$or": [{"score": {"$gt": 9}}, {"product": "def"}]}}}),
        &["1", "4"],
    );
    expect(
        &survey,
        bson!({"results": {"$elemMatch": {}}}),
        &["1", "2", "3", "4"],
    );
}

#[test]
fn size() {
    let docs = vec![
        bson!({"_id": 1, "field": ["red", "green"]}),
        bson!({"_id": 2, "field": "apple lime"}),
        bson!({"_id": 3, "field": ["fruit"]}),
        bson!({"_id": 4, "field": [["a", "b"]]}),
        bson!({"_id": 5, "field": []}),
    ];
    expect(&docs, bson!({"field": {"$size": 2}}), &["1"]);
    expect(&docs, bson!({"field": {"$size": 1}}), &["3", "4"]);
    expect(&docs, bson!({"field": {"$size": 0}}), &["5"]);
    expect(
        &docs,
        bson!({"field": {"$not": {"$size": 1}}}),
        &["1", "2", "5"],
    );
}

fn bit_docs() -> Vec<Bson> {
    vec![
        bson!({"_id": 1, "a": 54}),
        bson!({"_id": 2, "a": 20}),
        bson!({"_id": 3, "a": 20.0}),
        bson!({"_id": 4, "a": (bin(0, &[0x66]))}),
    ]
}

#[test]
fn bitwise() {
    let docs = bit_docs();
    expect(&docs, bson!({"a": {"$bitsAllClear": [1, 5]}}), &["2", "3"]);
    expect(&docs, bson!({"a": {"$bitsAllClear": 35}}), &["2", "3"]);
    expect(
        &docs,
        bson!({"a": {"$bitsAllClear": (bin(0, &[0x20]))}}),
        &["2", "3"],
    );
    expect(&docs, bson!({"a": {"$bitsAllSet": [1, 5]}}), &["1", "4"]);
    expect(&docs, bson!({"a": {"$bitsAllSet": 50}}), &["1"]);
    expect(
        &docs,
        bson!({"a": {"$bitsAllSet": (bin(0, &[0x30]))}}),
        &["1"],
    );
    expect(&docs, bson!({"a": {"$bitsAnyClear": [1, 5]}}), &["2", "3"]);
    expect(
        &docs,
        bson!({"a": {"$bitsAnyClear": 35}}),
        &["1", "2", "3", "4"],
    );
    expect(
        &docs,
        bson!({"a": {"$bitsAnyClear": (bin(0, &[0x30]))}}),
        &["2", "3", "4"],
    );
    expect(&docs, bson!({"a": {"$bitsAnySet": [1, 5]}}), &["1", "4"]);
    expect(&docs, bson!({"a": {"$bitsAnySet": 35}}), &["1", "4"]);
    expect(
        &docs,
        bson!({"a": {"$bitsAnySet": (bin(0, &[0x30]))}}),
        &["1", "2", "3", "4"],
    );
    // Negative numbers are two's complement, sign-extended past bit 63.
    let neg = vec![bson!({"_id": 5, "a": -5}), bson!({"_id": 6, "a": 5})];
    expect(&neg, bson!({"a": {"$bitsAllSet": [0, 63, 100]}}), &["5"]);
    expect(&neg, bson!({"a": {"$bitsAllClear": [2]}}), &["5"]);
    expect(&neg, bson!({"a": {"$bitsAnySet": [2]}}), &["6"]);
    expect(&neg, bson!({"a": {"$bitsAllClear": [200]}}), &["6"]);
    // Non-integral doubles and non-numbers never match.
    let odd = vec![
        bson!({"_id": 1, "a": 1.5}),
        bson!({"_id": 2, "a": "1"}),
        bson!({"_id": 3, "a": (f64::NAN)}),
    ];
    expect(&odd, bson!({"a": {"$bitsAllClear": [5]}}), &[]);
    expect(&odd, bson!({"a": {"$bitsAnyClear": [5]}}), &[]);
}
