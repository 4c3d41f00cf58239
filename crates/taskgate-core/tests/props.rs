//! Property tests of the parsers at the edge: whatever the text, no panic;
//! what the service writes parses back to the same value.

use proptest::prelude::*;
use taskgate_core::duration::parse_duration_ms;
use taskgate_core::{
    AccountId, ApiKeySecret, ApiSlug, IdempotencyKey, KeyType, Micros, PlanName, TaskId,
    TaskStatus, Timestamp,
};

fn key_type() -> impl Strategy<Value = KeyType> {
    prop_oneof![
        Just(KeyType::Live),
        Just(KeyType::Test),
        Just(KeyType::Restricted)
    ]
}

/// Text near the formats: their prefixes and alphabets mixed with anything.
fn near(prefixes: &'static [&'static str]) -> impl Strategy<Value = String> {
    (
        prop::sample::select(prefixes),
        prop::collection::vec(
            prop_oneof![
                4 => prop::char::range('0', '9'),
                4 => prop::char::range('A', 'Z'),
                4 => prop::char::range('a', 'z'),
                1 => any::<char>(),
            ],
            0..64,
        ),
    )
        .prop_map(|(p, cs)| format!("{p}{}", cs.into_iter().collect::<String>()))
}

proptest! {
    #[test]
    fn api_keys_never_panic(s in any::<String>(), t in near(&["tg_", "tg_test_", "tg_restrict_", ""])) {
        let _ = ApiKeySecret::parse(&s);
        let _ = ApiKeySecret::parse(&t);
    }

    #[test]
    fn generated_keys_parse_back_and_any_one_change_is_caught(
        kind in key_type(),
        at in any::<prop::sample::Index>(),
        with in prop::char::range('0', 'z').prop_filter("base62", |c| c.is_ascii_alphanumeric()),
    ) {
        let key = ApiKeySecret::generate(kind);
        let whole = key.expose();
        let parsed = ApiKeySecret::parse(whole).expect("a generated key parses");
        prop_assert_eq!(parsed.key_type(), kind);
        prop_assert_eq!(parsed.hash(), key.hash());
        // One character of the random part or checksum changed: refused.
        let body = kind.prefix().len()..whole.len();
        let i = body.start + at.index(body.len());
        let mut changed: Vec<char> = whole.chars().collect();
        prop_assume!(changed[i] != with);
        changed[i] = with;
        let changed: String = changed.into_iter().collect();
        prop_assert!(ApiKeySecret::parse(&changed).is_none(), "{}", changed);
    }

    #[test]
    fn ids_never_panic_and_round_trip(s in any::<String>(), t in near(&["task_", "acct_", "key_"])) {
        let _ = TaskId::parse(&s);
        let _ = TaskId::parse(&t);
        let _ = AccountId::parse(&t);
        let id = TaskId::new();
        prop_assert_eq!(TaskId::parse(&id.to_string()), Ok(id));
    }

    #[test]
    fn timestamps_never_panic_and_round_trip(s in any::<String>(), ms in 0i64..253_402_300_799_999) {
        let _ = Timestamp::parse_rfc3339(&s);
        let t = Timestamp::from_unix_ms(ms);
        prop_assert_eq!(Timestamp::parse_rfc3339(&t.rfc3339()), Some(t));
        let _ = Timestamp::from_unix_ms(ms.wrapping_mul(7919)).rfc3339();
    }

    #[test]
    fn small_parsers_never_panic(s in any::<String>(), d in near(&["", "1", "90", "1h"])) {
        let _ = parse_duration_ms(&s);
        let _ = parse_duration_ms(&d);
        let _ = Micros::parse_usd(&s);
        let _ = IdempotencyKey::parse(&s);
        let _ = ApiSlug::parse(&s);
        let _ = PlanName::parse(&s);
        let _ = s.parse::<TaskStatus>();
    }

    #[test]
    fn money_round_trips(micros in 0i64..i64::MAX / 2) {
        let m = Micros(micros);
        prop_assert_eq!(Micros::parse_usd(&m.to_usd_string()), Ok(m));
    }
}
