//! Tests of the document codec (`cairn_storage::doc`): byte-identical round trips of random
//! documents with every BSON type, field and array order, subtree keys and subtree decoding,
//! limits (MongoDB's nesting rule, key length, size), and corrupt or random stored bytes.

use bson::raw::{RawArray, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, cstr};
use bson::rawdoc;
use cairn_storage::doc::{
    self, DocAssembler, DocError, KeyValue, Limits, MAX_KEY_LEN, MAX_NESTING, Node, PathPart,
    decode_document, decode_stored_document, decode_stored_subtree, decode_subtree,
    encode_document, encode_document_with, encode_subtree, node_key, parse_path,
    parse_stored_value, parse_value,
};
use cairn_storage::keys;
use proptest::prelude::*;
use proptest::strategy::Union;

// ---------------------------------------------------------------------------------------------
// A raw BSON writer, so that every type (DBPointer, old binary, any Decimal128 bits, unsorted
// regex flags, …) can be produced byte for byte.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum V {
    Leaf(u8, Vec<u8>),
    Doc(Vec<(String, V)>),
    Arr(Vec<V>),
}

fn bstring(s: &str) -> Vec<u8> {
    let mut v = ((s.len() + 1) as i32).to_le_bytes().to_vec();
    v.extend_from_slice(s.as_bytes());
    v.push(0);
    v
}

fn type_of(v: &V) -> u8 {
    match v {
        V::Leaf(t, _) => *t,
        V::Doc(_) => 0x03,
        V::Arr(_) => 0x04,
    }
}

fn write_doc<'a>(fields: impl IntoIterator<Item = (String, &'a V)>) -> Vec<u8> {
    let mut out = vec![0; 4];
    for (name, v) in fields {
        out.push(type_of(v));
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        write_body(v, &mut out);
    }
    out.push(0);
    let len = out.len() as i32;
    out[..4].copy_from_slice(&len.to_le_bytes());
    out
}

fn write_body(v: &V, out: &mut Vec<u8>) {
    match v {
        V::Leaf(_, b) => out.extend_from_slice(b),
        V::Doc(fields) => out.extend(write_doc(fields.iter().map(|(n, v)| (n.clone(), v)))),
        V::Arr(items) => out.extend(write_doc(
            items.iter().enumerate().map(|(i, v)| (i.to_string(), v)),
        )),
    }
}

fn to_doc(fields: &[(String, V)]) -> RawDocumentBuf {
    let bytes = write_doc(fields.iter().map(|(n, v)| (n.clone(), v)));
    let doc = RawDocumentBuf::from_bytes(bytes).unwrap();
    validate_deep(&doc);
    doc
}

/// Every element of `doc`, at every level, parses with the bson crate.
fn validate_deep(doc: &RawDocument) {
    for item in doc.iter() {
        let (_, v) = item.unwrap();
        validate_value(v);
    }
}

fn validate_value(v: RawBsonRef<'_>) {
    match v {
        RawBsonRef::Document(d) => validate_deep(d),
        RawBsonRef::Array(a) => validate_array(a),
        RawBsonRef::JavaScriptCodeWithScope(c) => validate_deep(c.scope),
        _ => {}
    }
}

fn validate_array(a: &RawArray) {
    for item in a {
        validate_value(item.unwrap());
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

fn name() -> BoxedStrategy<String> {
    Union::new(vec![
        Just(String::new()).boxed(),
        Just("0".to_string()).boxed(),
        Just("1".to_string()).boxed(),
        Just("9".to_string()).boxed(),
        Just("10".to_string()).boxed(),
        Just("a".to_string()).boxed(),
        Just("A".to_string()).boxed(),
        Just("ab".to_string()).boxed(),
        Just("_id".to_string()).boxed(),
        Just("a.b".to_string()).boxed(),
        Just("$x".to_string()).boxed(),
        Just("é".to_string()).boxed(),
        Just("日本語".to_string()).boxed(),
        "[a-z]{1,6}".boxed(),
        "[^\u{0}]{0,5}".boxed(),
    ])
    .boxed()
}

fn text() -> BoxedStrategy<String> {
    Union::new_weighted(vec![
        (8, "\\PC{0,12}".boxed()),
        (1, "[a\u{0}]{0,6}".boxed()), // interior NULs are legal in BSON strings
        (1, (1000usize..20_000).prop_map(|n| "x".repeat(n)).boxed()),
    ])
    .boxed()
}

fn flat_doc() -> BoxedStrategy<Vec<u8>> {
    prop::collection::vec((name(), any::<i32>()), 0..4)
        .prop_map(|fields| {
            let fields = dedup(
                fields
                    .into_iter()
                    .map(|(n, i)| (n, V::Leaf(0x10, i.to_le_bytes().to_vec())))
                    .collect(),
            );
            write_doc(fields.iter().map(|(n, v)| (n.clone(), v)))
        })
        .boxed()
}

fn leaf() -> BoxedStrategy<V> {
    let binary = (
        prop_oneof![
            Just(0u8),
            Just(1),
            Just(2),
            Just(3),
            Just(4),
            Just(5),
            Just(6),
            Just(7),
            Just(8),
            Just(0x80),
            Just(0xFF)
        ],
        prop::collection::vec(any::<u8>(), 0..24),
    )
        .prop_map(|(subtype, bytes)| {
            let payload = if subtype == 2 {
                let mut p = (bytes.len() as i32).to_le_bytes().to_vec();
                p.extend(&bytes);
                p
            } else {
                bytes
            };
            let mut v = (payload.len() as i32).to_le_bytes().to_vec();
            v.push(subtype);
            v.extend(payload);
            V::Leaf(0x05, v)
        });
    let regex = ("[^\u{0}]{0,8}", "[imsuxl]{0,4}").prop_map(|(p, o)| {
        let mut v = p.into_bytes();
        v.push(0);
        v.extend(o.into_bytes());
        v.push(0);
        V::Leaf(0x0B, v)
    });
    let db_pointer = ("[a-z.]{0,12}", any::<[u8; 12]>()).prop_map(|(ns, id)| {
        let mut v = bstring(&ns);
        v.extend(id);
        V::Leaf(0x0C, v)
    });
    let code_with_scope = (text(), flat_doc()).prop_map(|(code, scope)| {
        let s = bstring(&code);
        let total = 4 + s.len() + scope.len();
        let mut v = (total as i32).to_le_bytes().to_vec();
        v.extend(s);
        v.extend(scope);
        V::Leaf(0x0F, v)
    });
    Union::new(vec![
        any::<f64>()
            .prop_map(|d| V::Leaf(0x01, d.to_le_bytes().to_vec()))
            .boxed(),
        prop_oneof![
            Just(f64::NAN),
            Just(-0.0),
            Just(0.0),
            Just(f64::INFINITY),
            Just(1.0)
        ]
        .prop_map(|d| V::Leaf(0x01, d.to_le_bytes().to_vec()))
        .boxed(),
        text().prop_map(|s| V::Leaf(0x02, bstring(&s))).boxed(),
        binary.boxed(),
        Just(V::Leaf(0x06, vec![])).boxed(),
        any::<[u8; 12]>()
            .prop_map(|b| V::Leaf(0x07, b.to_vec()))
            .boxed(),
        any::<bool>()
            .prop_map(|b| V::Leaf(0x08, vec![u8::from(b)]))
            .boxed(),
        any::<i64>()
            .prop_map(|d| V::Leaf(0x09, d.to_le_bytes().to_vec()))
            .boxed(),
        Just(V::Leaf(0x0A, vec![])).boxed(),
        regex.boxed(),
        db_pointer.boxed(),
        text().prop_map(|s| V::Leaf(0x0D, bstring(&s))).boxed(),
        text().prop_map(|s| V::Leaf(0x0E, bstring(&s))).boxed(),
        code_with_scope.boxed(),
        any::<i32>()
            .prop_map(|i| V::Leaf(0x10, i.to_le_bytes().to_vec()))
            .boxed(),
        prop_oneof![Just(0i32), Just(1), Just(-1)]
            .prop_map(|i| V::Leaf(0x10, i.to_le_bytes().to_vec()))
            .boxed(),
        any::<u64>()
            .prop_map(|t| V::Leaf(0x11, t.to_le_bytes().to_vec()))
            .boxed(),
        any::<i64>()
            .prop_map(|i| V::Leaf(0x12, i.to_le_bytes().to_vec()))
            .boxed(),
        prop_oneof![Just(0i64), Just(1), Just(-1)]
            .prop_map(|i| V::Leaf(0x12, i.to_le_bytes().to_vec()))
            .boxed(),
        any::<[u8; 16]>()
            .prop_map(|b| V::Leaf(0x13, b.to_vec()))
            .boxed(),
        Just(V::Leaf(0x7F, vec![])).boxed(),
        Just(V::Leaf(0xFF, vec![])).boxed(),
    ])
    .boxed()
}

/// Keeps the first occurrence of each name.
fn dedup(fields: Vec<(String, V)>) -> Vec<(String, V)> {
    let mut seen = std::collections::HashSet::new();
    fields
        .into_iter()
        .filter(|(n, _)| seen.insert(n.clone()))
        .collect()
}

fn value() -> BoxedStrategy<V> {
    leaf()
        .prop_recursive(5, 96, 8, |inner| {
            prop_oneof![
                prop::collection::vec((name(), inner.clone()), 0..8).prop_map(|f| V::Doc(dedup(f))),
                prop::collection::vec(inner, 0..10).prop_map(V::Arr),
            ]
        })
        .boxed()
}

fn document() -> BoxedStrategy<Vec<(String, V)>> {
    prop::collection::vec((name(), value()), 0..12)
        .prop_map(dedup)
        .boxed()
}

fn id_key() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        any::<i32>().prop_map(|i| keys::encode_to_vec(RawBsonRef::Int32(i), false).unwrap()),
        "[a-z]{0,10}".prop_map(|s| keys::encode_to_vec(RawBsonRef::String(&s), false).unwrap()),
        Just(Vec::new()),
    ]
    .boxed()
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn sorted(mut nodes: Vec<KeyValue>) -> Vec<KeyValue> {
    nodes.sort();
    nodes
}

fn encode_sorted(id: &[u8], doc: &RawDocument) -> Vec<KeyValue> {
    sorted(encode_document(id, doc).unwrap().nodes)
}

fn refs(nodes: &[KeyValue]) -> impl Iterator<Item = (&[u8], &[u8])> {
    nodes.iter().map(|(k, v)| (k.as_slice(), v.as_slice()))
}

fn decode(id: &[u8], nodes: &[KeyValue]) -> Result<RawDocumentBuf, DocError> {
    decode_document(id.len(), refs(nodes))
}

/// The bytes of `{"": v}`, for byte-exact comparison of values. (Appending a `RawBsonRef`
/// copies its bytes; converting to `RawBson` with `From` would sort regex flags.)
fn ref_bytes(v: RawBsonRef<'_>) -> Vec<u8> {
    let mut holder = RawDocumentBuf::new();
    holder.append(cstr!(""), v);
    holder.into_bytes()
}

fn value_bytes(v: &RawBson) -> Vec<u8> {
    ref_bytes(v.as_raw_bson_ref())
}

fn value_at<'a>(doc: &'a RawDocument, path: &[PathPart<'_>]) -> RawBsonRef<'a> {
    let mut cur = RawBsonRef::Document(doc);
    for part in path {
        cur = match *part {
            PathPart::Field(n) => cur.as_document().unwrap().get(n).unwrap().unwrap(),
            PathPart::Index(i) => cur.as_array().unwrap().get(i as usize).unwrap().unwrap(),
        };
    }
    cur
}

/// The nodes at `i` and below it in a sorted node list (a prefix scan of its key).
fn subtree(nodes: &[KeyValue], i: usize) -> &[KeyValue] {
    let prefix = &nodes[i].0;
    let n = nodes[i..]
        .iter()
        .take_while(|(k, _)| k.starts_with(prefix))
        .count();
    &nodes[i..i + n]
}

fn path_of<'k>(id: &[u8], key: &'k [u8]) -> Vec<PathPart<'k>> {
    parse_path(&key[id.len()..]).unwrap()
}

fn nested_objects(levels: usize, innermost: RawDocumentBuf) -> RawDocumentBuf {
    // `levels` objects counting the returned top-level one.
    let mut d = innermost;
    for _ in 1..levels {
        d = rawdoc! { "a": d };
    }
    d
}

fn is_corrupt<T: std::fmt::Debug>(r: Result<T, DocError>) -> bool {
    matches!(r, Err(DocError::Corrupt(_)))
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// encode → sort by key → decode gives the input bytes; bson_size is the length; the
    /// root header is the first node in both orders.
    #[test]
    fn round_trip_is_byte_identical(id in id_key(), fields in document()) {
        let doc = to_doc(&fields);
        let enc = encode_document(&id, &doc).unwrap();
        prop_assert_eq!(enc.bson_size as usize, doc.as_bytes().len());
        prop_assert_eq!(&enc.nodes[0].0, &id);
        match parse_value(&enc.nodes[0].1).unwrap() {
            Node::Root { bson_size, child_count, next_ordinal } => {
                prop_assert_eq!(bson_size as usize, doc.as_bytes().len());
                prop_assert_eq!(child_count as usize, fields.len());
                prop_assert_eq!(next_ordinal, fields.len() as u64);
            }
            other => prop_assert!(false, "root is {other:?}"),
        }
        for (k, _) in &enc.nodes {
            prop_assert!(k.len() <= MAX_KEY_LEN);
        }
        let nodes = sorted(enc.nodes);
        prop_assert_eq!(&nodes[0].0, &id);
        let back = decode(&id, &nodes).unwrap();
        prop_assert_eq!(back.as_bytes(), doc.as_bytes());
        // The streaming assembler agrees.
        let mut asm = DocAssembler::new();
        for (k, v) in &nodes {
            prop_assert!(asm.push(k, v).unwrap().is_none());
        }
        let last = asm.finish().unwrap().unwrap();
        prop_assert_eq!(last.as_bytes(), doc.as_bytes());
    }

    /// A node's descendants are exactly the keys having its key as a proper prefix.
    #[test]
    fn descendants_are_exactly_the_prefixed_keys(id in id_key(), fields in document()) {
        let doc = to_doc(&fields);
        let nodes = encode_sorted(&id, &doc);
        let paths: Vec<Vec<PathPart<'_>>> = nodes.iter().map(|(k, _)| path_of(&id, k)).collect();
        for (a, (ka, _)) in nodes.iter().enumerate() {
            // node_key rebuilds the key from the path.
            prop_assert_eq!(&node_key(&id, &paths[a]).unwrap(), ka);
            for (b, (kb, _)) in nodes.iter().enumerate() {
                let by_key = a != b && kb.starts_with(ka);
                let by_path = paths[b].len() > paths[a].len() && paths[b].starts_with(&paths[a]);
                prop_assert_eq!(by_key, by_path, "{:?} vs {:?}", paths[a], paths[b]);
            }
            // In key order a node's subtree is contiguous and follows it.
            let sub = subtree(&nodes, a).len();
            let total = paths.iter().filter(|p| p.starts_with(&paths[a])).count();
            prop_assert_eq!(sub, total);
        }
    }

    /// Every node's prefix scan decodes to the original sub-value, byte for byte; encoding that
    /// sub-value alone with encode_subtree gives the same nodes.
    #[test]
    fn subtrees_decode_to_the_original_values(id in id_key(), fields in document()) {
        let doc = to_doc(&fields);
        let nodes = encode_sorted(&id, &doc);
        for i in 0..nodes.len() {
            let sub = subtree(&nodes, i);
            let path = path_of(&id, &nodes[i].0);
            let got = decode_subtree(nodes[i].0.len(), refs(sub)).unwrap().unwrap();
            let want = value_at(&doc, &path);
            prop_assert_eq!(value_bytes(&got), ref_bytes(want), "at {:?}", path);
            if !path.is_empty() {
                let ordinal = parse_value(&nodes[i].1).unwrap().ordinal().unwrap();
                let depth = path.len(); // the holder's nesting level
                let mine = sorted(encode_subtree(
                    &nodes[i].0, ordinal, want, depth, &Limits::default(),
                ).unwrap());
                prop_assert_eq!(mine.as_slice(), sub);
            }
        }
        // A path that does not exist.
        let missing = node_key(&id, &[PathPart::Field("no such field \u{1F600}")]).unwrap();
        let scan: Vec<&KeyValue> = nodes.iter().filter(|(k, _)| k.starts_with(&missing)).collect();
        prop_assert!(decode_subtree(missing.len(), scan.iter().map(|(k, v)| (k, v))).unwrap().is_none());
    }

    /// Any damage to a valid encoding is an error or still decodes to valid BSON; never a panic.
    #[test]
    fn damaged_encodings_never_panic(
        id in id_key(),
        fields in document(),
        ops in prop::collection::vec((0u8..8, any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let doc = to_doc(&fields);
        let mut nodes = encode_sorted(&id, &doc);
        for (op, at, byte) in ops {
            let i = at.index(nodes.len());
            match op {
                0 => { let v = &mut nodes[i].1; if !v.is_empty() { let j = at.index(v.len()); v[j] ^= byte | 1; } }
                1 => { let v = &mut nodes[i].1; let j = at.index(v.len() + 1); v.truncate(j); }
                2 => { if nodes.len() > 1 { nodes.remove(i); } }
                3 => { let n = nodes[i].clone(); nodes.insert(i, n); }
                4 => { let j = at.index(nodes.len()); nodes.swap(i, j); }
                5 => { let k = &mut nodes[i].0; if !k.is_empty() { let j = at.index(k.len()); k[j] ^= byte | 1; } }
                6 => { nodes[i].1.push(byte); }
                _ => { let k = &mut nodes[i].0; let j = at.index(k.len() + 1); k.truncate(j); }
            }
        }
        if let Ok(d) = decode(&id, &nodes) {
            validate_deep(&d);
        }
        if let Ok(Some(RawBson::Document(d))) = decode_subtree(id.len(), refs(&nodes)) {
            validate_deep(&d);
        }
        let mut asm = DocAssembler::new();
        for (k, v) in &nodes {
            if let Ok(Some(d)) = asm.push(k, v) { validate_deep(&d); }
        }
        if let Ok(Some(d)) = asm.finish() { validate_deep(&d); }
    }

    /// Random bytes: every entry point returns an error or a value, never panics.
    #[test]
    fn random_bytes_never_panic(
        id_len in 0usize..4,
        pairs in prop::collection::vec(
            (prop::collection::vec(any::<u8>(), 0..12), prop::collection::vec(any::<u8>(), 0..24)),
            0..12,
        ),
    ) {
        let _ = decode_document(id_len, pairs.iter().map(|(k, v)| (k, v)));
        let _ = decode_subtree(id_len, pairs.iter().map(|(k, v)| (k, v)));
        let mut asm = DocAssembler::new();
        for (k, v) in &pairs {
            let _ = parse_value(v);
            let _ = parse_path(k);
            let _ = asm.push(k, v);
        }
        let _ = asm.finish();
    }

    /// Random bytes behind valid-looking kinds and keys.
    #[test]
    fn random_values_behind_valid_kinds_never_panic(
        kinds in prop::collection::vec(
            prop_oneof![Just(0u8), Just(3), Just(4), Just(1), Just(2), Just(5), Just(0x0B),
                        Just(0x0C), Just(0x0F), Just(0x08), Just(0x13), Just(0x7F)],
            1..10,
        ),
        tails in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 10),
        names in prop::collection::vec(prop_oneof![Just("a"), Just("b"), Just("")], 10),
        nest in prop::collection::vec(any::<bool>(), 10),
    ) {
        let id = b"K".to_vec();
        let mut nodes = Vec::new();
        let mut key = id.clone();
        for (i, kind) in kinds.iter().enumerate() {
            let mut v = vec![*kind];
            v.extend(&tails[i]);
            if i > 0 {
                if !nest[i] { key.truncate(id.len()); }
                if *kind == 0x0B && nest[i] {
                    key.push(doc::TAG_INDEX);
                    key.extend((i as u32).to_be_bytes());
                } else {
                    key.push(doc::TAG_FIELD);
                    key.extend(names[i].as_bytes());
                    key.push(0);
                }
            }
            nodes.push((key.clone(), v));
        }
        let nodes = sorted(nodes);
        if let Ok(d) = decode(&id, &nodes) { validate_deep(&d); }
        let _ = decode_subtree(id.len(), refs(&nodes));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Arrays of 1,000+ elements (scalars and documents) keep their order.
    #[test]
    fn large_arrays_round_trip(
        id in id_key(),
        items in prop::collection::vec(prop_oneof![leaf(), leaf().prop_map(|l| V::Doc(vec![("x".into(), l)]))], 1000..1300),
    ) {
        let fields = vec![("big".to_string(), V::Arr(items.clone())), ("after".to_string(), V::Leaf(0x0A, vec![]))];
        let doc = to_doc(&fields);
        let nodes = encode_sorted(&id, &doc);
        let back = decode(&id, &nodes).unwrap();
        prop_assert_eq!(back.as_bytes(), doc.as_bytes());
        let big = node_key(&id, &[PathPart::Field("big")]).unwrap();
        let at = nodes.iter().position(|(k, _)| *k == big).unwrap();
        let got = decode_subtree(big.len(), refs(subtree(&nodes, at))).unwrap().unwrap();
        prop_assert_eq!(got.as_array().unwrap().into_iter().count(), items.len());
    }

    /// Chains of objects and arrays nested up to the limit, with random siblings on the way.
    #[test]
    fn nesting_near_the_limit_round_trips(
        id in id_key(),
        depth in (MAX_NESTING - 4)..=MAX_NESTING,
        arrays in prop::collection::vec(any::<bool>(), MAX_NESTING),
        extras in prop::collection::vec(prop::option::of((name(), leaf())), MAX_NESTING),
        innermost_empty in any::<bool>(),
    ) {
        // Level `depth` holds a leaf (or, past it, an empty container, which does not count).
        let mut v = if innermost_empty { V::Doc(vec![]) } else { V::Leaf(0x10, 7i32.to_le_bytes().to_vec()) };
        let mut cur = V::Doc(vec![("z".into(), v)]);
        for level in (2..depth).rev() {
            v = if arrays[level] {
                let mut items = vec![cur];
                if let Some((_, l)) = &extras[level] { items.push(l.clone()); }
                V::Arr(items)
            } else {
                let mut f = vec![("z".to_string(), cur)];
                if let Some((n, l)) = &extras[level] && n != "z" { f.insert(0, (n.clone(), l.clone())); }
                V::Doc(f)
            };
            cur = v;
        }
        let fields = vec![("_id".to_string(), V::Leaf(0x10, 1i32.to_le_bytes().to_vec())), ("deep".to_string(), cur)];
        let doc = to_doc(&fields);
        let nodes = encode_sorted(&id, &doc);
        let back = decode(&id, &nodes).unwrap();
        prop_assert_eq!(back.as_bytes(), doc.as_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// Layout and order
// ---------------------------------------------------------------------------------------------

#[test]
fn module_doc_example_bytes() {
    let doc = rawdoc! { "b": 1, "a": {} };
    let id = b"K".to_vec();
    let enc = encode_document(&id, &doc).unwrap();
    assert_eq!(enc.bson_size, 20);
    let want: Vec<KeyValue> = vec![
        (b"K".to_vec(), vec![0x00, 0x01, 0x02, 0x14, 0x02]),
        (
            b"KF\x62\x00".to_vec(),
            vec![0x10, 0x00, 0x01, 0x00, 0x00, 0x00],
        ),
        (b"KF\x61\x00".to_vec(), vec![0x03, 0x01, 0x00, 0x00]),
    ];
    assert_eq!(enc.nodes, want, "document order, root first");
    let nodes = sorted(enc.nodes);
    assert_eq!(decode(&id, &nodes).unwrap().as_bytes(), doc.as_bytes());
}

#[test]
fn key_components() {
    let id = [0xAA];
    assert_eq!(node_key(&id, &[]).unwrap(), [0xAA]);
    assert_eq!(
        node_key(
            &id,
            &[
                PathPart::Field("ab"),
                PathPart::Index(3),
                PathPart::Field("")
            ]
        )
        .unwrap(),
        [0xAA, 0x46, b'a', b'b', 0x00, 0x49, 0, 0, 0, 3, 0x46, 0x00]
    );
    assert_eq!(
        parse_path(&[0x46, b'a', 0x00, 0x49, 0, 0, 1, 0]).unwrap(),
        [PathPart::Field("a"), PathPart::Index(256)]
    );
    // A field "0" and index 0 differ.
    assert_ne!(
        node_key(&id, &[PathPart::Field("0")]).unwrap(),
        node_key(&id, &[PathPart::Index(0)]).unwrap()
    );
    assert!(matches!(
        node_key(&id, &[PathPart::Field("a\0F")]),
        Err(DocError::Malformed(_))
    ));
    for bad in [
        &[0x46, b'a'][..],
        &[0x49, 0, 0],
        &[0x47],
        &[0x46, 0xFF, 0x00],
    ] {
        assert!(is_corrupt(parse_path(bad)), "{bad:?}");
    }
}

#[test]
fn leaf_values_keep_type_and_raw_bytes() {
    let doc = rawdoc! {
        "i": 1i32, "l": 1i64, "d": 1.0, "s": "x",
        "n": bson::Decimal128::from_bytes([0; 16]),
    };
    let id = b"K".to_vec();
    let nodes = encode_sorted(&id, &doc);
    let leaf = |name: &str| {
        let k = node_key(&id, &[PathPart::Field(name)]).unwrap();
        let (_, v) = nodes.iter().find(|(kk, _)| *kk == k).unwrap();
        v.clone()
    };
    assert_eq!(leaf("i"), [0x10, 0x00, 1, 0, 0, 0]);
    assert_eq!(leaf("l"), [0x12, 0x01, 1, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(leaf("d"), [0x01, 0x02, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F]);
    assert_eq!(leaf("s"), [0x02, 0x03, 2, 0, 0, 0, b'x', 0]);
    assert_eq!(leaf("n")[..2], [0x13, 0x04]);
    match parse_value(&leaf("s")).unwrap() {
        Node::Leaf {
            ordinal,
            element_type,
            value,
        } => {
            assert_eq!(ordinal, 3);
            assert_eq!(element_type, bson::spec::ElementType::String);
            assert_eq!(value, [2, 0, 0, 0, b'x', 0]);
        }
        other => panic!("{other:?}"),
    }
    for v in [leaf("i"), leaf("s")] {
        assert_eq!(parse_value(&v).unwrap().to_bytes(), v);
    }
}

#[test]
fn insertion_order_survives_key_order() {
    let id = b"K".to_vec();
    let doc = rawdoc! { "z": 1, "y": 2, "x": { "c": 1, "b": 2, "a": 3 }, "w": 4, "": 5 };
    let nodes = encode_sorted(&id, &doc);
    // Keys sort by name...
    let names: Vec<_> = nodes[1..]
        .iter()
        .filter_map(|(k, _)| match path_of(&id, k).as_slice() {
            [PathPart::Field(n)] => Some(n.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(names, ["", "w", "x", "y", "z"]);
    // ...and decoding restores insertion order.
    assert_eq!(decode(&id, &nodes).unwrap().as_bytes(), doc.as_bytes());

    let numeric = rawdoc! { "10": "ten", "9": "nine", "1": "one", "0": "zero", "100": 0 };
    let nodes = encode_sorted(&id, &numeric);
    assert_eq!(decode(&id, &nodes).unwrap().as_bytes(), numeric.as_bytes());
}

#[test]
fn array_elements_sort_by_index() {
    let id = b"K".to_vec();
    let items: Vec<i32> = (0..300).collect();
    let mut arr = bson::raw::RawArrayBuf::new();
    for i in &items {
        arr.push(*i);
    }
    let doc = rawdoc! { "t": arr };
    let nodes = encode_sorted(&id, &doc);
    let k9 = node_key(&id, &[PathPart::Field("t"), PathPart::Index(9)]).unwrap();
    let k10 = node_key(&id, &[PathPart::Field("t"), PathPart::Index(10)]).unwrap();
    let k256 = node_key(&id, &[PathPart::Field("t"), PathPart::Index(256)]).unwrap();
    assert!(k9 < k10 && k10 < k256);
    let order: Vec<u32> = nodes
        .iter()
        .filter_map(|(k, _)| match path_of(&id, k).as_slice() {
            [_, PathPart::Index(i)] => Some(*i),
            _ => None,
        })
        .collect();
    assert_eq!(order, (0..300).collect::<Vec<u32>>());
    assert_eq!(decode(&id, &nodes).unwrap().as_bytes(), doc.as_bytes());
    // Element values carry their index as ordinal.
    let (_, v) = nodes.iter().find(|(k, _)| *k == k256).unwrap();
    assert_eq!(parse_value(v).unwrap().ordinal(), Some(256));
}

#[test]
fn subtree_of_fields_nested_fields_and_elements() {
    let id = keys::encode_to_vec(RawBsonRef::Int32(5), false).unwrap();
    let doc = rawdoc! {
        "a": { "b": { "c": [1, { "d": "x" }, []] }, "e": 2.5 },
        "t": [ { "k": 1 }, [ "p", "q" ] ],
        "s": "str",
        // Flags out of order: kept as stored, not sorted.
        "r": RawBson::RegularExpression(bson::Regex {
            pattern: "^a".to_string().try_into().unwrap(),
            options: "xi".to_string().try_into().unwrap(),
        }),
    };
    let nodes = encode_sorted(&id, &doc);
    let scan = |path: &[PathPart<'_>]| {
        let k = node_key(&id, path).unwrap();
        let sub: Vec<KeyValue> = nodes
            .iter()
            .filter(|(kk, _)| kk.starts_with(&k))
            .cloned()
            .collect();
        decode_subtree(k.len(), refs(&sub)).unwrap()
    };
    use PathPart::{Field as F, Index as I};
    let cases: Vec<(Vec<PathPart<'_>>, RawBson)> = vec![
        (vec![F("s")], RawBson::String("str".into())),
        (vec![F("a"), F("e")], RawBson::Double(2.5)),
        (
            vec![F("a"), F("b")],
            RawBson::from(value_at(&doc, &[F("a"), F("b")])),
        ),
        (
            vec![F("a"), F("b"), F("c"), I(1)],
            RawBson::Document(rawdoc! { "d": "x" }),
        ),
        (
            vec![F("a"), F("b"), F("c"), I(1), F("d")],
            RawBson::String("x".into()),
        ),
        (
            vec![F("a"), F("b"), F("c"), I(2)],
            RawBson::from(value_at(&doc, &[F("a"), F("b"), F("c"), I(2)])),
        ),
        (vec![F("t")], RawBson::from(value_at(&doc, &[F("t")]))),
        (vec![F("t"), I(1), I(0)], RawBson::String("p".into())),
        (
            vec![F("r")],
            RawBson::RegularExpression(bson::Regex {
                pattern: "^a".to_string().try_into().unwrap(),
                options: "xi".to_string().try_into().unwrap(),
            }),
        ),
        (vec![], RawBson::Document(doc.clone())),
    ];
    for (path, want) in cases {
        let got = scan(&path).unwrap();
        assert_eq!(value_bytes(&got), value_bytes(&want), "{path:?}");
    }
    assert!(scan(&[F("a"), F("zz")]).is_none());
    assert!(scan(&[F("t"), I(7)]).is_none());
}

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

#[test]
fn mongodb_nesting_limit_at_the_boundary() {
    assert_eq!(MAX_NESTING, 180);
    let id = b"K".to_vec();
    // MongoDB's makeNestedObject(180): 180 objects counting the top-level one.
    let ok = nested_objects(MAX_NESTING, rawdoc! { "a": 1 });
    let nodes = encode_sorted(&id, &ok);
    assert_eq!(decode(&id, &nodes).unwrap().as_bytes(), ok.as_bytes());
    let deep = nested_objects(MAX_NESTING + 1, rawdoc! { "a": 1 });
    assert_eq!(
        encode_document(&id, &deep).unwrap_err(),
        DocError::TooDeep { limit: MAX_NESTING }
    );
    // Empty subdocuments do not count: {} inside the 180th level is fine.
    let empty_inside = nested_objects(MAX_NESTING, rawdoc! { "a": {} });
    assert!(encode_document(&id, &empty_inside).is_ok());
    let empty_array_inside = nested_objects(MAX_NESTING, rawdoc! { "a": [] });
    assert!(encode_document(&id, &empty_array_inside).is_ok());
    // …but a non-empty one does.
    let one_more = nested_objects(MAX_NESTING, rawdoc! { "a": { "x": 1 } });
    assert_eq!(
        encode_document(&id, &one_more).unwrap_err(),
        DocError::TooDeep { limit: MAX_NESTING }
    );

    // makeNestedArray: arrays count the same; here a top-level document plus 179 arrays.
    let array_chain = |arrays: usize| {
        let mut v = RawBson::Int32(1);
        for _ in 0..arrays {
            let mut a = bson::raw::RawArrayBuf::new();
            a.push(v);
            v = RawBson::Array(a);
        }
        let mut d = RawDocumentBuf::new();
        d.append(cstr!("a"), v);
        d
    };
    assert!(encode_document(&id, &array_chain(MAX_NESTING - 1)).is_ok());
    assert_eq!(
        encode_document(&id, &array_chain(MAX_NESTING)).unwrap_err(),
        DocError::TooDeep { limit: MAX_NESTING }
    );

    // A code-with-scope's scope is a leaf and does not count.
    let scope = nested_objects(MAX_NESTING + 20, rawdoc! { "a": 1 });
    let cws = bson::raw::RawJavaScriptCodeWithScope {
        code: "f()".into(),
        scope,
    };
    let with_scope = nested_objects(
        MAX_NESTING,
        rawdoc! { "a": RawBson::JavaScriptCodeWithScope(cws) },
    );
    let nodes = encode_sorted(&id, &with_scope);
    assert_eq!(
        decode(&id, &nodes).unwrap().as_bytes(),
        with_scope.as_bytes()
    );

    // Other limits, and encode_subtree's depth accounting.
    let small = Limits {
        max_nesting: 3,
        ..Limits::default()
    };
    assert!(encode_document_with(&id, &nested_objects(3, rawdoc! { "a": 1 }), &small).is_ok());
    assert_eq!(
        encode_document_with(&id, &nested_objects(4, rawdoc! { "a": 1 }), &small).unwrap_err(),
        DocError::TooDeep { limit: 3 }
    );
    let sub = rawdoc! { "x": { "y": 1 } };
    let at = node_key(&id, &[PathPart::Field("a")]).unwrap();
    assert!(encode_subtree(&at, 0, RawBsonRef::Document(&sub), 1, &small).is_ok());
    assert_eq!(
        encode_subtree(&at, 0, RawBsonRef::Document(&sub), 2, &small).unwrap_err(),
        DocError::TooDeep { limit: 3 }
    );
}

#[test]
fn keys_over_the_limit_are_refused() {
    let id = b"K".to_vec();
    let long = "n".repeat(70 * 1024);
    let mut doc = RawDocumentBuf::new();
    doc.append(bson::raw::CString::try_from(long.as_str()).unwrap(), 1);
    match encode_document(&id, &doc).unwrap_err() {
        DocError::KeyTooLong { len, max } => {
            assert_eq!(max, MAX_KEY_LEN);
            assert_eq!(len, 1 + 1 + long.len() + 1);
        }
        e => panic!("{e}"),
    }
    // Exactly at the limit is fine, one more byte is not.
    let fits = "n".repeat(MAX_KEY_LEN - 3);
    let mut doc = RawDocumentBuf::new();
    doc.append(bson::raw::CString::try_from(fits.as_str()).unwrap(), 1);
    let nodes = encode_sorted(&id, &doc);
    assert_eq!(nodes[1].0.len(), MAX_KEY_LEN);
    assert_eq!(decode(&id, &nodes).unwrap().as_bytes(), doc.as_bytes());
    let over = "n".repeat(MAX_KEY_LEN - 2);
    let mut doc = RawDocumentBuf::new();
    doc.append(bson::raw::CString::try_from(over.as_str()).unwrap(), 1);
    assert!(matches!(
        encode_document(&id, &doc),
        Err(DocError::KeyTooLong { .. })
    ));
    // A long id_key alone, and a path whose names add up.
    let long_id = vec![7u8; MAX_KEY_LEN + 1];
    assert!(matches!(
        encode_document(&long_id, &rawdoc! {}),
        Err(DocError::KeyTooLong { .. })
    ));
    let name = "m".repeat(1000);
    let mut d = rawdoc! { "leaf": 1 };
    for _ in 0..70 {
        let mut outer = RawDocumentBuf::new();
        outer.append(bson::raw::CString::try_from(name.as_str()).unwrap(), d);
        d = outer;
    }
    assert!(matches!(
        encode_document(&id, &d),
        Err(DocError::KeyTooLong { .. })
    ));
    assert!(matches!(
        node_key(&long_id, &[]),
        Err(DocError::KeyTooLong { .. })
    ));
}

#[test]
fn oversized_and_malformed_input_is_refused() {
    let id = b"K".to_vec();
    let big = "x".repeat(doc::MAX_BSON_SIZE);
    let doc = rawdoc! { "s": big };
    assert!(matches!(
        encode_document(&id, &doc),
        Err(DocError::TooLarge { .. })
    ));
    // Duplicate field names cannot be stored as distinct keys.
    let mut dup = RawDocumentBuf::new();
    dup.append(cstr!("a"), 1);
    dup.append(cstr!("b"), 2);
    dup.append(cstr!("a"), "again");
    assert!(matches!(
        encode_document(&id, &dup),
        Err(DocError::Malformed(_))
    ));
    let nested_dup = rawdoc! { "o": dup.clone() };
    assert!(matches!(
        encode_document(&id, &nested_dup),
        Err(DocError::Malformed(_))
    ));
    // The same name at different levels is fine.
    let fine = rawdoc! { "a": { "a": { "a": 1 } }, "b": [ { "a": 1 }, { "a": 2 } ] };
    assert!(encode_document(&id, &fine).is_ok());
    // Bytes the bson crate frames but whose elements are broken.
    for bytes in [
        vec![12, 0, 0, 0, 0x08, b'a', 0, 2, 0, 0, 0, 0], // bool 2
        vec![11, 0, 0, 0, 0x10, b'a', 0, 1, 0, 0, 0],    // int32 overrunning
        vec![12, 0, 0, 0, 0x42, b'a', 0, 1, 0, 0, 0, 0], // unknown type
        vec![14, 0, 0, 0, 0x02, b'a', 0, 2, 0, 0, 0, 0xFF, 0, 0], // string not UTF-8
    ] {
        let d = RawDocument::from_bytes(&bytes).unwrap();
        assert!(
            matches!(encode_document(&id, d), Err(DocError::Malformed(_))),
            "{bytes:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Corrupt storage
// ---------------------------------------------------------------------------------------------

#[test]
fn corrupt_values_are_errors() {
    let cases: Vec<Vec<u8>> = vec![
        vec![],
        vec![0x00],                                                     // root: truncated
        vec![0x00, 0x02, 0, 5, 0],                                      // root: unknown version
        vec![0x00, 0x01, 0x80],                                         // truncated varint
        vec![0x00, 0x01, 0x80, 0x00, 5, 0],                             // non-minimal varint
        vec![0x00, 0x01, 0, 5, 1],                                      // 1 child, next ordinal 0
        vec![0x00, 0x01, 1, 5, 1, 9],                                   // trailing bytes
        vec![0x03, 0, 0],                                               // object: truncated
        vec![0x04, 0],                                                  // array: truncated
        vec![0x04, 0, 0, 0],                                            // array: trailing
        vec![0x14, 0],                                                  // unknown kind
        vec![0x7E, 0],                                                  // unknown kind
        vec![0x10, 0, 1, 0, 0],                                         // int32 short
        vec![0x10, 0, 1, 0, 0, 0, 0],                                   // int32 long
        vec![0x12, 0, 1, 0, 0, 0],                                      // int64 short
        vec![0x01, 0],                                                  // double empty
        vec![0x07, 0, 1, 2, 3],                                         // ObjectId short
        vec![0x13, 0, 1],                                               // decimal short
        vec![0x08, 0, 2],                                               // bool 2
        vec![0x08, 0, 1, 1],                                            // bool long
        vec![0x0A, 0, 0],                                               // null with bytes
        vec![0x02, 0, 5, 0, 0, 0, b'a', 0],                             // string length too long
        vec![0x02, 0, 2, 0, 0, 0, b'a', 1],                             // string not terminated
        vec![0x02, 0, 0, 0, 0, 0],                                      // string length 0
        vec![0x02, 0, 2, 0, 0, 0, 0xC3, 0],                             // string not UTF-8
        vec![0x05, 0, 3, 0, 0, 0, 0, 1, 2],                             // binary short
        vec![0x05, 0, 5, 0, 0, 0, 2, 9, 0, 0, 0, 1], // old binary, bad inner length
        vec![0x0B, 0, b'a', 0],                      // regex missing flags
        vec![0x0B, 0, b'a', 0, b'i', 0, 0],          // regex trailing
        vec![0x0C, 0, 1, 0, 0, 0, 0, 1, 2],          // DBPointer short
        vec![0x0F, 0, 14, 0, 0, 0, 1, 0, 0, 0, 0, 5, 0, 0, 0], // code w/ scope short
        vec![0x0F, 0, 14, 0, 0, 0, 1, 0, 0, 0, 0, 6, 0, 0, 0, 0], // scope length wrong
        vec![0x0F, 0, 15, 0, 0, 0, 1, 0, 0, 0, 0, 6, 0, 0, 0, 0x42, 0], // scope bad element
        vec![
            0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02, 1, 0, 0, 0,
        ], // ordinal overflow
    ];
    for v in cases {
        assert!(
            is_corrupt(parse_value(&v)),
            "{v:02x?} parsed as {:?}",
            parse_value(&v)
        );
    }
    // Sanity: well-formed variants of some of the above parse.
    for v in [
        vec![0x00, 0x01, 1, 5, 1],
        vec![0x05, 0, 4, 0, 0, 0, 2, 0, 0, 0, 0],
        vec![0x0B, 0, b'a', 0, b'i', 0],
        vec![0x0F, 0, 14, 0, 0, 0, 1, 0, 0, 0, 0, 5, 0, 0, 0, 0],
    ] {
        assert!(parse_value(&v).is_ok(), "{v:02x?}");
    }
}

fn sample() -> (Vec<u8>, RawDocumentBuf, Vec<KeyValue>) {
    let id = keys::encode_to_vec(RawBsonRef::String("doc"), false).unwrap();
    let doc = rawdoc! { "z": 1, "a": { "y": [10, 20, 30], "b": true }, "m": "s" };
    let nodes = encode_sorted(&id, &doc);
    (id, doc, nodes)
}

fn find(nodes: &[KeyValue], id: &[u8], path: &[PathPart<'_>]) -> usize {
    let k = node_key(id, path).unwrap();
    nodes.iter().position(|(kk, _)| *kk == k).unwrap()
}

#[test]
fn corrupt_structures_are_errors() {
    use PathPart::{Field as F, Index as I};
    let (id, doc, nodes) = sample();
    assert_eq!(decode(&id, &nodes).unwrap().as_bytes(), doc.as_bytes());

    let mutate = |f: &dyn Fn(&mut Vec<KeyValue>)| {
        let mut n = nodes.clone();
        f(&mut n);
        decode(&id, &n)
    };
    // Each node is needed: dropping any one is detected.
    for i in 0..nodes.len() {
        assert!(
            is_corrupt(mutate(&|n| {
                n.remove(i);
            })),
            "dropping node {i}"
        );
    }
    // Duplicated or reordered nodes.
    assert!(is_corrupt(mutate(&|n| {
        let x = n[2].clone();
        n.insert(2, x);
    })));
    assert!(is_corrupt(mutate(&|n| n.swap(1, 2))));
    // An extra field the header does not count.
    assert!(is_corrupt(mutate(&|n| {
        let k = node_key(&id, &[F("zz")]).unwrap();
        n.push((k, vec![0x0A, 1]));
    })));
    // An extra array element.
    assert!(is_corrupt(mutate(&|n| {
        let k = node_key(&id, &[F("a"), F("y"), I(3)]).unwrap();
        let at = find(n, &id, &[F("a"), F("y"), I(2)]) + 1;
        n.insert(at, (k, vec![0x0A, 3]));
    })));
    // A gap in an array (element 1 renamed to 5).
    assert!(is_corrupt(mutate(&|n| {
        let at = find(n, &id, &[F("a"), F("y"), I(1)]);
        n[at].0 = node_key(&id, &[F("a"), F("y"), I(5)]).unwrap();
        n.sort();
    })));
    // Array element with the wrong ordinal.
    assert!(is_corrupt(mutate(&|n| {
        let at = find(n, &id, &[F("a"), F("y"), I(1)]);
        n[at].1[1] = 7;
    })));
    // Two fields sharing an ordinal, and an ordinal beyond next_ordinal.
    assert!(is_corrupt(mutate(&|n| {
        let z = find(n, &id, &[F("z")]);
        let m = find(n, &id, &[F("m")]);
        n[z].1[1] = n[m].1[1];
    })));
    assert!(is_corrupt(mutate(&|n| {
        let z = find(n, &id, &[F("z")]);
        n[z].1[1] = 3;
    })));
    // bson_size disagreeing with the document.
    assert!(is_corrupt(mutate(&|n| {
        n[0].1 = Node::Root {
            next_ordinal: 3,
            bson_size: 7,
            child_count: 3,
        }
        .to_bytes();
    })));
    // A node of another document, a node missing its parent, a second root header.
    assert!(is_corrupt(mutate(&|n| {
        let mut k = keys::encode_to_vec(RawBsonRef::String("dog"), false).unwrap();
        k.extend([0x46, b'a', 0]);
        n.push((k, vec![0x0A, 0]));
    })));
    assert!(is_corrupt(mutate(&|n| {
        let k = node_key(&id, &[F("q"), F("r")]).unwrap();
        n.push((k, vec![0x0A, 0]));
        n.sort();
    })));
    assert!(is_corrupt(mutate(&|n| {
        let k = node_key(&id, &[F("zz")]).unwrap();
        n.push((k, n[0].1.clone()));
    })));
    // A field component under an array, an index under an object.
    assert!(is_corrupt(mutate(&|n| {
        let at = find(n, &id, &[F("a"), F("y"), I(0)]);
        n[at].0 = node_key(&id, &[F("a"), F("y"), F("0")]).unwrap();
        n.sort();
    })));
    assert!(is_corrupt(mutate(&|n| {
        let at = find(n, &id, &[F("m")]);
        n[at].0 = node_key(&id, &[I(0)]).unwrap();
        n.sort();
    })));
    // First node not the root; empty input; wrong id length.
    assert!(is_corrupt(decode(&id, &nodes[1..])));
    assert!(is_corrupt(decode(&id, &[])));
    assert!(is_corrupt(decode_document(id.len() + 1, refs(&nodes))));
    // decode_subtree of a leaf followed by junk.
    let at = find(&nodes, &id, &[F("m")]);
    assert!(is_corrupt(decode_subtree(
        nodes[at].0.len(),
        refs(&[nodes[at].clone(), nodes[at].clone()])
    )));
}

#[test]
fn assembler_splits_a_scan_into_documents() {
    let docs: Vec<RawDocumentBuf> = (0..5)
        .map(|i| rawdoc! { "_id": i, "v": { "w": [i, { "x": "y" }] }, "e": {} })
        .collect();
    let mut scan = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        let id = keys::encode_to_vec(RawBsonRef::Int32(i as i32), false).unwrap();
        scan.extend(encode_document(&id, d).unwrap().nodes);
    }
    let scan = sorted(scan);
    let run = |scan: &[KeyValue]| {
        let mut asm = DocAssembler::new();
        let mut out = Vec::new();
        for (k, v) in scan {
            if let Some(r) = asm.push(k, v).transpose() {
                out.push(r);
            }
        }
        if let Some(r) = asm.finish().transpose() {
            out.push(r);
        }
        out
    };
    let out = run(&scan);
    assert_eq!(out.len(), docs.len());
    for (got, want) in out.iter().zip(&docs) {
        assert_eq!(got.as_ref().unwrap().as_bytes(), want.as_bytes());
    }
    // A corrupt node in document 2 fails that document only.
    let mut damaged = scan.clone();
    let id2 = keys::encode_to_vec(RawBsonRef::Int32(2), false).unwrap();
    let at = damaged
        .iter()
        .position(|(k, v)| k.starts_with(&id2) && !doc::is_root(v))
        .unwrap();
    damaged[at].1 = vec![0x7E];
    let out = run(&damaged);
    assert_eq!(out.len(), docs.len());
    for (i, (got, want)) in out.iter().zip(&docs).enumerate() {
        if i == 2 {
            assert!(matches!(got, Err(DocError::Corrupt(_))));
        } else {
            assert_eq!(got.as_ref().unwrap().as_bytes(), want.as_bytes());
        }
    }
    // Nodes before any root header are one failed document.
    let out = run(&scan[1..]);
    assert_eq!(out.len(), docs.len());
    assert!(out[0].is_err());
    // A corrupt root header fails its document.
    let mut bad_root = scan.clone();
    let r = bad_root.iter().position(|(k, _)| *k == id2).unwrap();
    bad_root[r].1 = vec![0x00, 0x09];
    let out = run(&bad_root);
    assert_eq!(out.len(), docs.len());
    assert!(out[2].is_err() && out[1].is_ok() && out[3].is_ok());
}

// ---------------------------------------------------------------------------------------------
// Packed subtrees
// ---------------------------------------------------------------------------------------------

/// Thresholds the packed properties run at: tiny (most containers spill, small ones pack,
/// so layouts mix at every level), medium, and the default.
fn threshold() -> BoxedStrategy<u32> {
    prop_oneof![
        Just(16u32),
        Just(64),
        Just(300),
        Just(doc::DEFAULT_PACK_THRESHOLD)
    ]
    .boxed()
}

fn encode_packed(id: &[u8], doc: &RawDocument, t: u32) -> Vec<KeyValue> {
    sorted(
        encode_document_with(id, doc, &Limits::packing(t))
            .unwrap()
            .nodes,
    )
}

/// The BSON bytes of a container value (its length prefix through terminator).
fn container_len(v: RawBsonRef<'_>) -> Option<usize> {
    match v {
        RawBsonRef::Document(d) => Some(d.as_bytes().len()),
        RawBsonRef::Array(a) => Some(a.as_bytes().len()),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// With packing: byte-identical round trips (decoder and assembler), subtree keys, every
    /// node's prefix scan decodes to its value and re-encodes to the same nodes, and each
    /// container is packed exactly when its BSON fits the threshold.
    #[test]
    fn packed_layouts_round_trip(id in id_key(), fields in document(), t in threshold()) {
        let doc = to_doc(&fields);
        let limits = Limits::packing(t);
        let enc = encode_document_with(&id, &doc, &limits).unwrap();
        prop_assert_eq!(enc.bson_size as usize, doc.as_bytes().len());
        prop_assert_eq!(&enc.nodes[0].0, &id);
        let nodes = sorted(enc.nodes);
        let back = decode(&id, &nodes).unwrap();
        prop_assert_eq!(back.as_bytes(), doc.as_bytes());
        let mut asm = DocAssembler::new();
        for (k, v) in &nodes {
            prop_assert!(asm.push(k, v).unwrap().is_none());
        }
        let last = asm.finish().unwrap().unwrap();
        prop_assert_eq!(last.as_bytes(), doc.as_bytes());
        let paths: Vec<Vec<PathPart<'_>>> = nodes.iter().map(|(k, _)| path_of(&id, k)).collect();
        for i in 0..nodes.len() {
            let path = &paths[i];
            prop_assert_eq!(&node_key(&id, path).unwrap(), &nodes[i].0);
            let sub = subtree(&nodes, i);
            let got = decode_subtree(nodes[i].0.len(), refs(sub)).unwrap().unwrap();
            let want = value_at(&doc, path);
            prop_assert_eq!(value_bytes(&got), ref_bytes(want), "at {:?}", path);
            let node = parse_value(&nodes[i].1).unwrap();
            let size = if path.is_empty() { Some(doc.as_bytes().len()) } else { container_len(want) };
            match node {
                Node::PackedRoot { .. } | Node::Packed { .. } => {
                    prop_assert!(size.unwrap() <= t as usize, "packed {:?} of {:?} bytes", path, size);
                    prop_assert_eq!(sub.len(), 1, "a packed node has no descendants");
                }
                Node::Root { .. } | Node::Object { .. } | Node::Array { .. } => {
                    prop_assert!(size.unwrap() > t as usize, "spilled {:?} of {:?} bytes", path, size);
                }
                Node::Leaf { .. } => {}
            }
            if !path.is_empty() {
                let ordinal = node.ordinal().unwrap();
                let mine = sorted(encode_subtree(&nodes[i].0, ordinal, want, path.len(), &limits).unwrap());
                prop_assert_eq!(mine.as_slice(), sub);
            }
        }
        // Packing never adds keys.
        prop_assert!(nodes.len() <= encode_sorted(&id, &doc).len());
    }

    /// Hysteresis: a container that was spilled stays spilled until it shrinks to half the
    /// threshold; one that was packed (or is new) packs up to the threshold.
    #[test]
    fn hysteresis_keeps_spilled_containers_spilled(id in id_key(), fields in document(), t in threshold()) {
        let doc = to_doc(&fields);
        let limits = Limits::packing(t);
        let all_spilled = encode_sorted(&id, &doc);
        let spilled = doc::spilled_keys(&all_spilled);
        let enc = doc::encode_document_after(&id, &doc, &limits, &|k| spilled.contains(k)).unwrap();
        let nodes = sorted(enc.nodes);
        let back = decode(&id, &nodes).unwrap();
        prop_assert_eq!(back.as_bytes(), doc.as_bytes());
        for (k, v) in &nodes {
            let path = path_of(&id, k);
            let size = if path.is_empty() { Some(doc.as_bytes().len()) } else { container_len(value_at(&doc, &path)) };
            match parse_value(v).unwrap() {
                Node::PackedRoot { .. } | Node::Packed { .. } => {
                    prop_assert!(size.unwrap() <= t as usize / 2);
                }
                Node::Root { .. } | Node::Object { .. } | Node::Array { .. } => {
                    prop_assert!(size.unwrap() > t as usize / 2);
                }
                Node::Leaf { .. } => {}
            }
        }
    }

    /// Damage to packed encodings is an error or still valid BSON; never a panic.
    #[test]
    fn damaged_packed_encodings_never_panic(
        id in id_key(),
        fields in document(),
        t in threshold(),
        ops in prop::collection::vec((0u8..4, any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let doc = to_doc(&fields);
        let mut nodes = encode_packed(&id, &doc, t);
        for (op, at, byte) in ops {
            let i = at.index(nodes.len());
            match op {
                0 => { let v = &mut nodes[i].1; if !v.is_empty() { let j = at.index(v.len()); v[j] ^= byte | 1; } }
                1 => { let v = &mut nodes[i].1; let j = at.index(v.len() + 1); v.truncate(j); }
                2 => { if nodes.len() > 1 { nodes.remove(i); } }
                _ => { let mut k = nodes[i].0.clone(); k.extend([doc::TAG_FIELD, b'q', 0]); nodes.push((k, vec![0x0A, 0])); nodes.sort(); }
            }
        }
        if let Ok(d) = decode(&id, &nodes) {
            validate_deep(&d);
        }
        let mut asm = DocAssembler::new();
        for (k, v) in &nodes {
            if let Ok(Some(d)) = asm.push(k, v) { validate_deep(&d); }
        }
        if let Ok(Some(d)) = asm.finish() { validate_deep(&d); }
    }
}

#[test]
fn packed_module_doc_example_bytes() {
    let doc = rawdoc! { "b": 1, "a": {} };
    let id = b"K".to_vec();
    let enc = encode_document_with(&id, &doc, &Limits::packing(2048)).unwrap();
    let mut want = vec![0x20];
    want.extend_from_slice(doc.as_bytes());
    assert_eq!(enc.nodes, vec![(id.clone(), want)]);
    assert_eq!(decode(&id, &enc.nodes).unwrap().as_bytes(), doc.as_bytes());

    // At threshold 16 the 20-byte document spills; its 5-byte `{}` packs.
    let enc = encode_document_with(&id, &doc, &Limits::packing(16)).unwrap();
    let want: Vec<KeyValue> = vec![
        (b"K".to_vec(), vec![0x00, 0x01, 0x02, 0x14, 0x02]),
        (
            b"KF\x62\x00".to_vec(),
            vec![0x10, 0x00, 0x01, 0x00, 0x00, 0x00],
        ),
        (
            b"KF\x61\x00".to_vec(),
            vec![0x23, 0x01, 0x05, 0x00, 0x00, 0x00, 0x00],
        ),
    ];
    assert_eq!(enc.nodes, want);
    assert_eq!(
        decode(&id, &sorted(enc.nodes)).unwrap().as_bytes(),
        doc.as_bytes()
    );
    // Threshold 0 is the one-key-per-node layout.
    assert_eq!(
        encode_document_with(&id, &doc, &Limits::packing(0)).unwrap(),
        encode_document(&id, &doc).unwrap()
    );
}

#[test]
fn packed_arrays_get_canonical_names_and_sizes() {
    // An array whose element names are not "0", "1", …: stored with canonical names, and
    // the document's size is that of what a read returns, in both layouts.
    let mut inner = Vec::new();
    inner.extend_from_slice(&[0; 4]);
    for (name, v) in [("x", 1i32), ("long name", 2)] {
        inner.push(0x10);
        inner.extend_from_slice(name.as_bytes());
        inner.push(0);
        inner.extend_from_slice(&v.to_le_bytes());
    }
    inner.push(0);
    let n = inner.len() as i32;
    inner[..4].copy_from_slice(&n.to_le_bytes());
    let mut d = Vec::new();
    d.extend_from_slice(&[0; 4]);
    d.push(0x04);
    d.extend_from_slice(b"a\0");
    d.extend_from_slice(&inner);
    d.push(0);
    let n = d.len() as i32;
    d[..4].copy_from_slice(&n.to_le_bytes());
    let doc = RawDocumentBuf::from_bytes(d).unwrap();
    let canonical = rawdoc! { "a": [1, 2] };
    let id = b"K".to_vec();
    for t in [0, 12, 2048] {
        let enc = encode_document_with(&id, &doc, &Limits::packing(t)).unwrap();
        assert_eq!(enc.bson_size as usize, canonical.as_bytes().len(), "at {t}");
        let back = decode(&id, &sorted(enc.nodes)).unwrap();
        assert_eq!(back.as_bytes(), canonical.as_bytes(), "at {t}");
    }
}

#[test]
fn corrupt_packed_values_are_errors() {
    let good = rawdoc! { "a": [1, 2], "b": { "c": "d" } };
    let mut root = vec![doc::KIND_PACKED_ROOT];
    root.extend_from_slice(good.as_bytes());
    assert!(matches!(parse_value(&root), Ok(Node::PackedRoot { .. })));
    let arr = rawdoc! { "0": 1, "1": 2 };
    let mut packed_array = vec![doc::KIND_PACKED_ARRAY, 0x03];
    packed_array.extend_from_slice(arr.as_bytes());
    assert!(matches!(
        parse_value(&packed_array),
        Ok(Node::Packed {
            ordinal: 3,
            array: true,
            ..
        })
    ));
    let mut cases: Vec<Vec<u8>> = vec![
        vec![doc::KIND_PACKED_ROOT],
        vec![doc::KIND_PACKED_OBJECT, 0],
        vec![doc::KIND_PACKED_ARRAY],
        root[..root.len() - 1].to_vec(), // truncated
        {
            let mut v = root.clone();
            v.push(0); // trailing byte
            v
        },
    ];
    // An array element named "1" where "0" belongs.
    let bad_names = rawdoc! { "1": 1 };
    let mut v = vec![doc::KIND_PACKED_ARRAY, 0];
    v.extend_from_slice(bad_names.as_bytes());
    cases.push(v);
    // A nested array inside a packed root with a non-canonical name.
    let mut v = vec![doc::KIND_PACKED_ROOT];
    let nested = rawdoc! { "a": { "x": 1 } };
    let mut bytes = nested.as_bytes().to_vec();
    bytes[4] = 0x04; // turn the object into an array named "x"
    v.extend_from_slice(&bytes);
    cases.push(v);
    // A bad string inside.
    let mut v = root.clone();
    let at = v.iter().rposition(|&b| b == b'd').unwrap();
    v[at] = 0xC3;
    cases.push(v);
    for v in cases {
        assert!(is_corrupt(parse_value(&v)), "{v:02x?}");
    }
    // Nodes below a packed node, and a packed root followed by another node.
    let id = b"K".to_vec();
    let enc = encode_document_with(&id, &good, &Limits::packing(2048)).unwrap();
    let mut n = enc.nodes.clone();
    n.push((b"KF\x61\x00".to_vec(), vec![0x0A, 0]));
    assert!(is_corrupt(decode(&id, &n)));
    let enc = encode_document_with(&id, &good, &Limits::packing(30)).unwrap();
    let mut n = sorted(enc.nodes);
    let b = node_key(&id, &[PathPart::Field("b")]).unwrap();
    assert!(matches!(
        parse_value(&n.iter().find(|(k, _)| *k == b).unwrap().1),
        Ok(Node::Packed { array: false, .. })
    ));
    n.push((
        node_key(&id, &[PathPart::Field("b"), PathPart::Field("z")]).unwrap(),
        vec![0x0A, 0],
    ));
    assert!(is_corrupt(decode(&id, &sorted(n))));
}

/// The packed-array rule byte for byte: `0x24`, the ordinal, then the array's BSON with
/// canonical element names; a spilled parent's header counts it as one child.
#[test]
fn packed_array_value_bytes() {
    let doc = rawdoc! { "x": 7, "t": [1, 2] };
    let id = b"K".to_vec();
    // The document (31 bytes) spills at 20; the array (19 bytes) packs.
    let enc = encode_document_with(&id, &doc, &Limits::packing(20)).unwrap();
    let t = node_key(&id, &[PathPart::Field("t")]).unwrap();
    let (_, v) = enc.nodes.iter().find(|(k, _)| *k == t).unwrap();
    let want: Vec<u8> = vec![
        0x24, 0x01, // packed array, ordinal 1
        0x13, 0x00, 0x00, 0x00, // BSON length 19
        0x10, b'0', 0x00, 0x01, 0x00, 0x00, 0x00, // "0": int32 1
        0x10, b'1', 0x00, 0x02, 0x00, 0x00, 0x00, // "1": int32 2
        0x00,
    ];
    assert_eq!(v, &want);
    assert_eq!(
        enc.nodes[0].1,
        vec![0x00, 0x01, 0x02, doc.as_bytes().len() as u8, 0x02]
    );
    assert_eq!(enc.nodes.len(), 3, "root header, leaf x, packed t");
    assert_eq!(
        decode(&id, &sorted(enc.nodes)).unwrap().as_bytes(),
        doc.as_bytes()
    );
}

/// The hysteresis rule at its edges: a container of size s with T/2 < s <= T packs when new,
/// stays spilled when it was spilled, and packs again at s <= T/2; above T it never packs.
#[test]
fn hysteresis_edges() {
    let doc = rawdoc! { "a": [1, 2] }; // 27 bytes; the array is 19
    let id = b"K".to_vec();
    let kinds = |t: u32, spilled: bool| -> Vec<u8> {
        let all = encode_document(&id, &doc).unwrap().nodes;
        let was = doc::spilled_keys(&all);
        let enc = doc::encode_document_after(&id, &doc, &Limits::packing(t), &|k| {
            spilled && was.contains(k)
        })
        .unwrap();
        sorted(enc.nodes).iter().map(|(_, v)| v[0]).collect()
    };
    // T = 27: the whole document fits.
    assert_eq!(kinds(27, false), vec![doc::KIND_PACKED_ROOT]);
    // ... but was spilled, and 27 > 27/2: stays spilled; the array (19 > 13) too.
    assert_eq!(
        kinds(27, true),
        vec![doc::KIND_ROOT, doc::KIND_ARRAY, 0x10, 0x10]
    );
    // T = 38: the array (19 <= 19) packs again; the root (27 > 19) stays spilled.
    assert_eq!(
        kinds(38, true),
        vec![doc::KIND_ROOT, doc::KIND_PACKED_ARRAY]
    );
    // T = 54: everything is at most half the threshold: packed.
    assert_eq!(kinds(54, true), vec![doc::KIND_PACKED_ROOT]);
    // T = 26: the document never packs; the array packs when new.
    assert_eq!(
        kinds(26, false),
        vec![doc::KIND_ROOT, doc::KIND_PACKED_ARRAY]
    );
    // The threshold is capped.
    assert_eq!(
        Limits::packing(u32::MAX).pack_threshold,
        doc::MAX_PACK_THRESHOLD
    );
}

// ---------------------------------------------------------------------------------------------
// Trusted reads (packed values checked for their framing only)
// ---------------------------------------------------------------------------------------------

/// Walks every element of `doc` at every level, ignoring errors (bytes the trusted decoder did
/// not look inside): it must not panic.
fn touch_all(doc: &RawDocument) {
    for el in doc.iter() {
        match el {
            Ok((_, RawBsonRef::Document(d))) => touch_all(d),
            Ok((_, RawBsonRef::Array(a))) => {
                for v in a {
                    if let Ok(RawBsonRef::Document(d)) = v {
                        touch_all(d);
                    }
                }
            }
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The trusted decoder and assembler give exactly what the validating ones give for
    /// every encoding the encoder writes.
    #[test]
    fn stored_reads_equal_validated_reads(id in id_key(), fields in document(), t in threshold()) {
        let doc = to_doc(&fields);
        let nodes = encode_packed(&id, &doc, t);
        let back = decode_stored_document(id.len(), refs(&nodes)).unwrap();
        prop_assert_eq!(back.as_bytes(), doc.as_bytes());
        let mut asm = DocAssembler::stored();
        for (k, v) in &nodes {
            prop_assert!(asm.push(k, v).unwrap().is_none());
        }
        let last = asm.finish().unwrap().unwrap();
        prop_assert_eq!(last.as_bytes(), doc.as_bytes());
        for (_, v) in &nodes {
            prop_assert_eq!(parse_stored_value(v).unwrap(), parse_value(v).unwrap());
        }
        for i in 0..nodes.len() {
            let sub = subtree(&nodes, i);
            let trusted = decode_stored_subtree(nodes[i].0.len(), refs(sub)).unwrap().unwrap();
            let validated = decode_subtree(nodes[i].0.len(), refs(sub)).unwrap().unwrap();
            prop_assert_eq!(value_bytes(&trusted), value_bytes(&validated));
        }
    }

    /// Damaged encodings read by the trusted decoder: an error, or a correctly framed
    /// document whose elements can be walked (with errors) — never a panic.
    #[test]
    fn damaged_stored_reads_never_panic(
        id in id_key(),
        fields in document(),
        t in threshold(),
        ops in prop::collection::vec((0u8..3, any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let doc = to_doc(&fields);
        let mut nodes = encode_packed(&id, &doc, t);
        for (op, at, byte) in ops {
            let i = at.index(nodes.len());
            match op {
                0 => { let v = &mut nodes[i].1; if !v.is_empty() { let j = at.index(v.len()); v[j] ^= byte | 1; } }
                1 => { let v = &mut nodes[i].1; let j = at.index(v.len() + 1); v.truncate(j); }
                _ => { if nodes.len() > 1 { nodes.remove(i); } }
            }
        }
        if let Ok(d) = decode_stored_document(id.len(), refs(&nodes)) {
            prop_assert!(RawDocument::from_bytes(d.as_bytes()).is_ok());
            touch_all(&d);
        }
        let mut asm = DocAssembler::stored();
        for (k, v) in &nodes {
            if let Ok(Some(d)) = asm.push(k, v) { touch_all(&d); }
        }
        if let Ok(Some(d)) = asm.finish() { touch_all(&d); }
        let _ = decode_stored_subtree(id.len(), refs(&nodes));
    }
}

/// What the trusted reads still refuse (framing, headers) and what they let through (the
/// inside of a packed value, which the bson crate's accessors then report).
#[test]
fn stored_reads_check_framing_only() {
    let good = rawdoc! { "a": [1, 2], "b": { "c": "d" } };
    let mut root = vec![doc::KIND_PACKED_ROOT];
    root.extend_from_slice(good.as_bytes());
    let framing: Vec<Vec<u8>> = vec![
        vec![doc::KIND_PACKED_ROOT],
        vec![doc::KIND_PACKED_OBJECT, 0],
        root[..root.len() - 1].to_vec(),
        {
            let mut v = root.clone();
            v.push(0);
            v
        },
        {
            let mut v = root.clone();
            let last = v.len() - 1;
            v[last] = 1; // not NUL-terminated
            v
        },
        // A length prefix below the minimum, and a negative one.
        vec![doc::KIND_PACKED_ROOT, 4, 0, 0, 0],
        vec![doc::KIND_PACKED_ROOT, 0xFF, 0xFF, 0xFF, 0xFF, 0],
    ];
    for v in &framing {
        assert!(is_corrupt(parse_stored_value(v)), "{v:02x?}");
        assert!(is_corrupt(decode_stored_document(
            1,
            [(b"K".as_slice(), v.as_slice())]
        )));
    }
    // A bad string inside: the validating parse refuses it, the trusted one passes it on,
    // and reading the field reports the error.
    let mut bad = root.clone();
    let at = bad.iter().rposition(|&b| b == b'd').unwrap();
    bad[at] = 0xC3;
    assert!(is_corrupt(parse_value(&bad)));
    let d = decode_stored_document(1, [(b"K".as_slice(), bad.as_slice())]).unwrap();
    assert_eq!(d.as_bytes(), &bad[1..]);
    let b = d.get_document("b").unwrap();
    assert!(b.get("c").is_err());
    // A packed root followed by another node is still refused.
    assert!(is_corrupt(decode_stored_document(
        1,
        [
            (b"K".as_slice(), root.as_slice()),
            (b"KFa\0".as_slice(), [0x0A, 0].as_slice())
        ]
    )));
}
