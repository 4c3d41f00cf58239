//! A stable fingerprint of a JSON value, seeding the sandbox's generator.

use serde_json::Value;

/// 64-bit FNV-1a: tiny and, unlike `DefaultHasher`, stable across Rust
/// releases, so sandbox outputs do not change when the toolchain does.
pub(super) struct Fnv1a(u64);

impl Fnv1a {
    pub(super) fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    pub(super) fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub(super) fn finish(&self) -> u64 {
        self.0
    }
}

/// Hashes a value with object keys in sorted order, so `{"a":1,"b":2}` and
/// `{"b":2,"a":1}` agree whatever map ordering serde_json was built with.
pub(super) fn hash_value(hasher: &mut Fnv1a, value: &Value) {
    match value {
        Value::Null => hasher.write(b"n"),
        Value::Bool(b) => hasher.write(if *b { b"t" } else { b"f" }),
        Value::Number(n) => {
            hasher.write(b"#");
            hasher.write(n.to_string().as_bytes());
        }
        Value::String(s) => {
            hasher.write(b"s");
            hasher.write(&(s.len() as u64).to_le_bytes());
            hasher.write(s.as_bytes());
        }
        Value::Array(items) => {
            hasher.write(b"[");
            hasher.write(&(items.len() as u64).to_le_bytes());
            items.iter().for_each(|item| hash_value(hasher, item));
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            hasher.write(b"{");
            hasher.write(&(keys.len() as u64).to_le_bytes());
            for key in keys {
                hash_value(hasher, &Value::String(key.clone()));
                hash_value(hasher, &map[key.as_str()]);
            }
        }
    }
}
