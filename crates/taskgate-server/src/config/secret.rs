//! Credentials of the configuration (`metrics_token`), read as strings only.

use taskgate_providers::upstream::Secret;

/// A credential read from the file or a `TASKGATE_*` variable. Only a string
/// is taken: figment reads `TASKGATE_X=1234` as a number, and serde's own
/// error would then quote it, so the refusal here names no value.
pub(super) fn secret_string<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Secret>, D::Error> {
    struct Visitor;
    const NOT_A_STRING: &str = "must be a string (in an environment variable, a value that \
         reads as a number, true/false, a list or a table must be put in double quotes)";
    impl<'v> serde::de::Visitor<'v> for Visitor {
        type Value = Option<Secret>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            if v.is_empty() {
                return Err(E::custom("must not be empty (leave it out for none)"));
            }
            Ok(Some(Secret::new(v)))
        }
        // The defaults' `None`, as figment hands it back.
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'v>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Err(E::custom(NOT_A_STRING))
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Err(E::custom(NOT_A_STRING))
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Err(E::custom(NOT_A_STRING))
        }
        fn visit_i128<E: serde::de::Error>(self, _: i128) -> Result<Self::Value, E> {
            Err(E::custom(NOT_A_STRING))
        }
        fn visit_u128<E: serde::de::Error>(self, _: u128) -> Result<Self::Value, E> {
            Err(E::custom(NOT_A_STRING))
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Err(E::custom(NOT_A_STRING))
        }
        fn visit_seq<A: serde::de::SeqAccess<'v>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(serde::de::Error::custom(NOT_A_STRING))
        }
        fn visit_map<A: serde::de::MapAccess<'v>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(serde::de::Error::custom(NOT_A_STRING))
        }
    }
    d.deserialize_any(Visitor)
}
