//! Saved prefetch models, one definition for every front end (`patio replay`,
//! `patio mount prefetch`, `patio.open`):
//!
//! * a **model** is the blob a learning policy saves: `PMKV` (markov) or `PPRD`
//!   (pattern, `patio_core::online`); which one it is is read from its magic, so a
//!   model of one policy given to the other is named as such, not as damaged bytes;
//! * a **model file** (`--save-model`, `save_model=`) holds one model per replayed
//!   stream (`PPMS`, an empty model for a stream whose policy learned none); a file
//!   holding a bare model counts as a file of one stream;
//! * a consumer of **one stream's model** (a mount, `patio.open`) takes a model file
//!   with exactly one non-empty stream model, or a bare model, checked by loading it
//!   with the policy that will use it.
//!
//! Model files are written crash-safely (temporary file, `fsync`, `rename`).

use crate::error::{PrefetchError, Result};
use crate::policy::PolicyKind;
use patio_core::codec::{put_uvarint, read_blob, write_blob, Cursor, BLOB_HEADER};
use std::path::Path;

const MODELS_MAGIC: &[u8; 4] = b"PPMS";
const MODELS_VERSION: u16 = 1;

/// The policy whose model `bytes` are, by their magic; `None` for anything else.
pub fn kind_of(bytes: &[u8]) -> Option<PolicyKind> {
    let magic = bytes.get(..4)?;
    if magic == crate::markov::MAGIC {
        Some(PolicyKind::Markov)
    } else if magic == patio_core::online::MODEL_MAGIC {
        Some(PolicyKind::Pattern)
    } else {
        None
    }
}

/// Refuses a model of another learning policy than `kind` (before decoding it).
pub fn check_kind(kind: PolicyKind, bytes: &[u8]) -> Result<()> {
    match kind_of(bytes) {
        Some(found) if found != kind => Err(PrefetchError::WrongModel {
            what: "the model".into(),
            found: found.name(),
            expected: kind.name(),
        }),
        _ => Ok(()),
    }
}

/// Per-stream models as one checksummed blob (an empty model for a stream whose
/// policy learns none).
pub fn save_models(models: &[Option<Vec<u8>>]) -> Vec<u8> {
    let mut payload = Vec::new();
    put_uvarint(&mut payload, models.len() as u64);
    for m in models {
        let m = m.as_deref().unwrap_or(&[]);
        put_uvarint(&mut payload, m.len() as u64);
        payload.extend_from_slice(m);
    }
    write_blob(MODELS_MAGIC, MODELS_VERSION, &payload)
}

/// The per-stream models of [`save_models`]; a bare model is one stream's.
pub fn load_models(bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
    if !bytes.starts_with(MODELS_MAGIC) {
        return Ok(vec![bytes.to_vec()]);
    }
    let corrupt = |error| PrefetchError::Corrupt {
        what: "damaged model file".into(),
        error,
    };
    let (_, payload) = read_blob(MODELS_MAGIC, MODELS_VERSION, bytes).map_err(corrupt)?;
    let mut c = Cursor::with_base(payload, BLOB_HEADER);
    let n = c.count(c.remaining(), "stream model").map_err(corrupt)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = c.count(c.remaining(), "model byte").map_err(corrupt)?;
        out.push(c.take(len).map_err(corrupt)?.to_vec());
    }
    if !c.is_at_end() {
        return Err(corrupt(c.error("trailing bytes after the stream models")));
    }
    Ok(out)
}

/// The models of the model file at `path`, one per stream.
pub fn read_models(path: &Path) -> Result<Vec<Vec<u8>>> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| PrefetchError::io(format!("cannot read model {shown}"), e))?;
    load_models(&bytes).map_err(|e| e.named(&shown))
}

/// The one stream's model in the file at `path` for policy `kind`: the only non-empty
/// model of a model file, or a bare model; checked by loading it.
pub fn read_stream_model(path: &Path, kind: PolicyKind) -> Result<Vec<u8>> {
    if !kind.has_model() {
        return Err(PrefetchError::Invalid(format!(
            "the {kind} policy takes no model"
        )));
    }
    let shown = path.display().to_string();
    let mut models: Vec<Vec<u8>> = read_models(path)?
        .into_iter()
        .filter(|m| !m.is_empty())
        .collect();
    if models.len() != 1 {
        return Err(PrefetchError::Invalid(format!(
            "{shown}: holds {} stream models; one stream needs one (save it with \
             `patio replay --stream N --save-model FILE`)",
            models.len()
        )));
    }
    let model = models.remove(0);
    kind.build(&[], Some(&model)).map_err(|e| e.named(&shown))?;
    Ok(model)
}

/// Writes per-stream `models` as the model file `path`, crash-safely.
pub fn write_models(path: &Path, models: &[Option<Vec<u8>>]) -> Result<()> {
    patio_core::persist::write_file(path, &save_models(models))
        .map_err(|e| PrefetchError::io(format!("cannot write model {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Markov;

    #[test]
    fn models_round_trip() {
        let models = vec![Some(vec![1u8, 2, 3]), None, Some(vec![9u8; 300])];
        let bytes = save_models(&models);
        let back = load_models(&bytes).unwrap();
        assert_eq!(back, [vec![1u8, 2, 3], vec![], vec![9u8; 300]]);
        assert!(load_models(&bytes[..bytes.len() - 2]).is_err());
        assert_eq!(load_models(b"bare").unwrap(), [b"bare".to_vec()]);
    }

    #[test]
    fn a_model_of_the_other_policy_is_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let markov = Markov::new(4096).save_bytes();
        let pattern = crate::pattern::Pattern::new().predictor().save();
        assert_eq!(kind_of(&markov), Some(PolicyKind::Markov));
        assert_eq!(kind_of(&pattern), Some(PolicyKind::Pattern));
        assert_eq!(kind_of(b"PPM"), None);
        let m = dir.path().join("m.model");
        write_models(&m, &[Some(markov.clone())]).unwrap();
        let msg = read_stream_model(&m, PolicyKind::Pattern)
            .unwrap_err()
            .to_string();
        assert_eq!(
            msg,
            format!(
                "{} is a markov model, expected a pattern model",
                m.display()
            )
        );
        assert_eq!(read_stream_model(&m, PolicyKind::Markov).unwrap(), markov);
        let p = dir.path().join("p.model");
        std::fs::write(&p, &pattern).unwrap();
        let msg = read_stream_model(&p, PolicyKind::Markov)
            .unwrap_err()
            .to_string();
        assert!(
            msg.ends_with("is a pattern model, expected a markov model"),
            "{msg}"
        );
        assert_eq!(read_stream_model(&p, PolicyKind::Pattern).unwrap(), pattern);
    }

    #[test]
    fn one_stream_needs_exactly_one_model_and_damage_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("m.model");
        let model = Markov::new(4096).save_bytes();
        write_models(&m, &[Some(model.clone()), None]).unwrap();
        assert_eq!(read_stream_model(&m, PolicyKind::Markov).unwrap(), model);
        write_models(&m, &[Some(model.clone()), Some(model)]).unwrap();
        let msg = read_stream_model(&m, PolicyKind::Markov)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("holds 2 stream models"), "{msg}");
        let mut bytes = std::fs::read(&m).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&m, &bytes).unwrap();
        let msg = read_stream_model(&m, PolicyKind::Markov)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("damaged model file"), "{msg}");
        std::fs::write(&m, b"not a model").unwrap();
        let msg = read_stream_model(&m, PolicyKind::Markov)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("not a saved markov model"), "{msg}");
        let e = read_stream_model(&dir.path().join("absent"), PolicyKind::Markov).unwrap_err();
        assert!(e.os_error().is_some() && e.to_string().starts_with("cannot read model"));
        let e = read_stream_model(&m, PolicyKind::Stride).unwrap_err();
        assert_eq!(e.to_string(), "the stride policy takes no model");
    }
}
