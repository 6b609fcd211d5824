//! SavedModels: TensorFlow's directory format for a trained model, loaded into a
//! [`Session`] and written from one.
//!
//! ```text
//! export_dir/
//!   saved_model.pb               a SavedModel proto: one MetaGraphDef per tag set
//!   variables/variables.index    the variables, a tensor bundle (checkpoint V2)
//!   variables/variables.data-00000-of-00001
//!   assets/                      files the graph reads (vocabularies, …)
//!   assets.extra/                files for other tools (serving warm-up requests)
//! ```
//!
//! [`SavedModel::load`] does what TensorFlow's C++ loader (`LoadSavedModel`)
//! does: it picks the `MetaGraphDef` whose tags are exactly the ones asked for,
//! imports its graph (functions of TensorFlow 2's library inlined), restores the
//! variables by running the graph's own restore op (`saver_def`) fed with the
//! `variables/variables` prefix, and runs the init op — TensorFlow 2's
//! `__saved_model_init_op` signature, else the `saved_model_main_op` or
//! `legacy_init_op` collection — with every asset tensor fed its file's path. The
//! model's [`Signature`]s then name its inputs and outputs:
//!
//! ```no_run
//! # fn main() -> graph::Result<()> {
//! use actorflow_actors::saved_model::SavedModel;
//! use graph::Tensor;
//! let model = SavedModel::load("export/1", &["serve"])?;
//! let sig = &model.signatures()["serving_default"];
//! println!("{:?} -> {:?}", sig.inputs, sig.outputs);
//! let out = model.run("serving_default", &[("x", Tensor::vector(&[1.0f32, 2.0, 3.0]))])?;
//! # let _ = out; Ok(()) }
//! ```
//!
//! [`SavedModelBuilder`] writes one (TensorFlow's `SavedModelBuilder`), from a
//! graph under construction and the session that holds its variables.

mod builder;
mod signature;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use graph::import::{graph_def_from_tf_proto, ImportOptions};
use graph::proto::tf::{collection_def, AssetFileDef, MetaGraphDef, SavedModel as SavedModelProto};
use graph::{GraphDef, Result, Status, Tensor};
use prost::Message;

use crate::session::state::SessionOptions;
use crate::Session;

pub use builder::{
    meta_graph_def, read_meta_graph, write_meta_graph, MetaGraphOptions, SavedModelBuilder,
};
pub use signature::{Signature, TensorSpec};

/// The file holding the SavedModel proto.
pub const SAVED_MODEL_FILENAME_PB: &str = "saved_model.pb";
/// The same in text format (read when there is no binary one).
pub const SAVED_MODEL_FILENAME_PBTXT: &str = "saved_model.pbtxt";
/// The directory of the variables' bundle.
pub const VARIABLES_DIRECTORY: &str = "variables";
/// The prefix of the variables' bundle inside [`VARIABLES_DIRECTORY`].
pub const VARIABLES_FILENAME: &str = "variables";
/// The directory of the asset files.
pub const ASSETS_DIRECTORY: &str = "assets";
/// The directory of files for other tools (serving warm-up requests).
pub const ASSETS_EXTRA_DIRECTORY: &str = "assets.extra";
/// The tag of graphs for serving.
pub const TAG_SERVE: &str = "serve";
/// The tag of graphs for training.
pub const TAG_TRAIN: &str = "train";
/// The signature clients get when they name none.
pub const DEFAULT_SERVING_SIGNATURE_DEF_KEY: &str = "serving_default";
/// TensorFlow 2's init op, recorded as a signature with one output of this key.
pub const INIT_OP_SIGNATURE_KEY: &str = "__saved_model_init_op";
/// The collection holding TensorFlow 1's main op.
pub const MAIN_OP_KEY: &str = "saved_model_main_op";
/// The collection holding TensorFlow 1's legacy init op (before main ops).
pub const LEGACY_INIT_OP_KEY: &str = "legacy_init_op";
/// The collection of `AssetFileDef`s of older SavedModels.
pub const ASSETS_KEY: &str = "saved_model_assets";
/// The signature method of predictions.
pub const PREDICT_METHOD_NAME: &str = "tensorflow/serving/predict";
/// The signature method of classifications.
pub const CLASSIFY_METHOD_NAME: &str = "tensorflow/serving/classify";
/// The signature method of regressions.
pub const REGRESS_METHOD_NAME: &str = "tensorflow/serving/regress";
/// The schema version every SavedModel has today.
pub const SAVED_MODEL_SCHEMA_VERSION: i64 = 1;

/// The `type_url` of an `AssetFileDef` in a `google.protobuf.Any`.
const ASSET_FILE_DEF_URL: &str = "type.googleapis.com/tensorflow.AssetFileDef";

/// A SavedModel loaded into a session; see the module docs.
pub struct SavedModel {
    session: Session,
    meta_graph: MetaGraphDef,
    signatures: BTreeMap<String, Signature>,
    export_dir: PathBuf,
}

impl std::fmt::Debug for SavedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SavedModel")
            .field("export_dir", &self.export_dir)
            .field("signatures", &self.signatures)
            .finish_non_exhaustive()
    }
}

impl SavedModel {
    /// Loads the graph tagged exactly `tags` from `export_dir` into a session
    /// with default options; see the module docs. A missing directory or tag set
    /// is `NotFound`, a damaged file `DataLoss`, naming the file.
    pub fn load(export_dir: impl AsRef<Path>, tags: &[&str]) -> Result<SavedModel> {
        SavedModel::load_with(export_dir, tags, SessionOptions::default())
    }

    /// [`SavedModel::load`] into a session made with `options`.
    pub fn load_with(
        export_dir: impl AsRef<Path>,
        tags: &[&str],
        options: SessionOptions,
    ) -> Result<SavedModel> {
        let export_dir = export_dir.as_ref().to_path_buf();
        let proto = read_saved_model(&export_dir)?;
        let meta_graph = find_meta_graph(proto, tags, &export_dir)?;
        let mut signatures = BTreeMap::new();
        for (k, v) in &meta_graph.signature_def {
            if k == INIT_OP_SIGNATURE_KEY {
                continue;
            }
            match Signature::from_proto(v) {
                Ok(s) => {
                    signatures.insert(k.clone(), s);
                }
                // A signature actorflow cannot run (sparse tensors) leaves the
                // others usable, as a server would want.
                Err(e) if e.code() == graph::Code::Unimplemented => {
                    tracing::warn!(signature = %k, error = %e, "skipping a signature");
                }
                Err(e) => {
                    return Err(e.context(format!(
                        "signature '{k}' of SavedModel {}",
                        export_dir.display()
                    )))
                }
            }
        }
        let graph = import_graph(&meta_graph, &export_dir)?;
        let session = Session::new(&graph, options)?;
        let assets = asset_feeds(&meta_graph, &export_dir)?;
        restore_variables(&session, &meta_graph, &export_dir, &assets)?;
        if let Some(init) = init_op(&meta_graph, &export_dir)? {
            let feeds = feed_refs(&assets);
            session.run(&feeds, &[], &[init.as_str()]).map_err(|e| {
                e.context(format!("running the init op of {}", export_dir.display()))
            })?;
        }
        tracing::info!(
            export_dir = %export_dir.display(),
            tags = ?tags,
            signatures = ?signatures.keys().collect::<Vec<_>>(),
            "loaded SavedModel"
        );
        Ok(SavedModel {
            session,
            meta_graph,
            signatures,
            export_dir,
        })
    }

    /// The session holding the model's graph and variables.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The loaded `MetaGraphDef`.
    pub fn meta_graph(&self) -> &MetaGraphDef {
        &self.meta_graph
    }

    /// The directory the model was loaded from.
    pub fn export_dir(&self) -> &Path {
        &self.export_dir
    }

    /// The model's signatures by key (the init op's is not one).
    pub fn signatures(&self) -> &BTreeMap<String, Signature> {
        &self.signatures
    }

    /// The signature `key`; `NotFound` listing the keys there are.
    pub fn signature(&self, key: &str) -> Result<&Signature> {
        self.signatures.get(key).ok_or_else(|| {
            Status::not_found(format!(
                "Serving signature key \"{key}\" not found; the model has {}",
                list(self.signatures.keys())
            ))
        })
    }

    /// Runs signature `key` on `inputs` (by input key) and returns every output
    /// by output key. Inputs the signature has defaults for may be left out;
    /// an unknown or missing input key, or a tensor of the wrong dtype or shape,
    /// is `InvalidArgument`.
    pub fn run(&self, key: &str, inputs: &[(&str, Tensor)]) -> Result<BTreeMap<String, Tensor>> {
        let sig = self.signature(key)?;
        let outputs: Vec<&str> = sig.outputs.keys().map(String::as_str).collect();
        self.run_outputs(key, inputs, &outputs)
    }

    /// [`SavedModel::run`] fetching only the outputs `output_keys`.
    pub fn run_outputs(
        &self,
        key: &str,
        inputs: &[(&str, Tensor)],
        output_keys: &[&str],
    ) -> Result<BTreeMap<String, Tensor>> {
        let sig = self.signature(key)?;
        let feeds = sig.feeds(key, inputs)?;
        let mut fetches = Vec::with_capacity(output_keys.len());
        for k in output_keys {
            let spec = sig.outputs.get(*k).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "output key '{k}' is not in signature '{key}' (its outputs: {})",
                    list(sig.outputs.keys())
                ))
            })?;
            fetches.push(spec.name.as_str());
        }
        let feed_refs: Vec<(&str, Tensor)> =
            feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
        let values = self.session.run(&feed_refs, &fetches, &[])?;
        Ok(output_keys
            .iter()
            .map(|k| (*k).to_owned())
            .zip(values)
            .collect())
    }
}

/// `a, b, c` (or `none`).
fn list<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    let v: Vec<&str> = keys.map(String::as_str).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Whether `dir` holds a SavedModel (either file of the proto).
pub fn maybe_saved_model_directory(dir: impl AsRef<Path>) -> bool {
    let dir = dir.as_ref();
    dir.join(SAVED_MODEL_FILENAME_PB).is_file() || dir.join(SAVED_MODEL_FILENAME_PBTXT).is_file()
}

/// Reads `export_dir`'s SavedModel proto (`saved_model.pb`, else
/// `saved_model.pbtxt`).
pub fn read_saved_model(export_dir: impl AsRef<Path>) -> Result<SavedModelProto> {
    let dir = export_dir.as_ref();
    let pb = dir.join(SAVED_MODEL_FILENAME_PB);
    if pb.is_file() {
        let bytes = std::fs::read(&pb)
            .map_err(|e| Status::from(e).context(format!("reading {}", pb.display())))?;
        return SavedModelProto::decode(bytes.as_slice()).map_err(|e| {
            Status::data_loss(format!(
                "cannot parse {} as a SavedModel: {e}",
                pb.display()
            ))
        });
    }
    let txt = dir.join(SAVED_MODEL_FILENAME_PBTXT);
    if txt.is_file() {
        let text = std::fs::read_to_string(&txt)
            .map_err(|e| Status::from(e).context(format!("reading {}", txt.display())))?;
        return proto::text::from_text::<SavedModelProto>(&text).map_err(|e| {
            Status::data_loss(format!(
                "cannot parse {} as a SavedModel: {e}",
                txt.display()
            ))
        });
    }
    Err(Status::not_found(format!(
        "SavedModel file does not exist at: {}/{{{SAVED_MODEL_FILENAME_PBTXT}|{SAVED_MODEL_FILENAME_PB}}}",
        dir.display()
    )))
}

/// The meta graph of `proto` whose tags are exactly `tags` (as sets).
fn find_meta_graph(proto: SavedModelProto, tags: &[&str], dir: &Path) -> Result<MetaGraphDef> {
    let want: std::collections::BTreeSet<&str> = tags.iter().copied().collect();
    let mut seen = Vec::new();
    for mg in proto.meta_graphs {
        let have: std::collections::BTreeSet<&str> = mg
            .meta_info_def
            .as_ref()
            .map(|m| m.tags.iter().map(String::as_str).collect())
            .unwrap_or_default();
        if have == want {
            return Ok(mg);
        }
        seen.push(format!(
            "{{ {} }}",
            have.into_iter().collect::<Vec<_>>().join(" ")
        ));
    }
    Err(Status::not_found(format!(
        "Could not find meta graph def matching supplied tags: {{ {} }} in {}; the SavedModel has {}. \
         To inspect available tag-sets in the SavedModel, run `actorflow inspect {}`",
        want.into_iter().collect::<Vec<_>>().join(" "),
        dir.display(),
        if seen.is_empty() { "no meta graphs".to_owned() } else { seen.join(", ") },
        dir.display()
    )))
}

/// The meta graph's graph in actorflow's form (library functions inlined).
fn import_graph(mg: &MetaGraphDef, dir: &Path) -> Result<GraphDef> {
    let gd = mg.graph_def.clone().unwrap_or_default();
    graph_def_from_tf_proto(&gd, &ImportOptions::default()).map_err(|e| {
        e.context(format!(
            "importing the graph of SavedModel {}",
            dir.display()
        ))
    })
}

/// The meta graph's asset files: `asset_file_def`, else the `saved_model_assets`
/// collection of older SavedModels.
pub fn asset_file_defs(mg: &MetaGraphDef) -> Result<Vec<AssetFileDef>> {
    if !mg.asset_file_def.is_empty() {
        return Ok(mg.asset_file_def.clone());
    }
    let Some(c) = mg.collection_def.get(ASSETS_KEY) else {
        return Ok(vec![]);
    };
    let Some(collection_def::Kind::AnyList(l)) = &c.kind else {
        return Err(Status::invalid_argument(format!(
            "collection '{ASSETS_KEY}' is not a list of AssetFileDef messages"
        )));
    };
    l.value
        .iter()
        .map(|any| {
            if any.type_url != ASSET_FILE_DEF_URL {
                return Err(Status::invalid_argument(format!(
                    "collection '{ASSETS_KEY}' holds a {}, not an AssetFileDef",
                    any.type_url
                )));
            }
            AssetFileDef::decode(any.value.as_slice()).map_err(|e| {
                Status::data_loss(format!("an AssetFileDef of '{ASSETS_KEY}' is damaged: {e}"))
            })
        })
        .collect()
}

/// Each asset tensor with the path of its file under `assets/`.
fn asset_feeds(mg: &MetaGraphDef, dir: &Path) -> Result<Vec<(String, Tensor)>> {
    let assets = dir.join(ASSETS_DIRECTORY);
    asset_file_defs(mg)?
        .into_iter()
        .map(|a| {
            let name = match a.tensor_info.and_then(|t| t.encoding) {
                Some(graph::proto::tf::tensor_info::Encoding::Name(n)) => n,
                _ => {
                    return Err(Status::invalid_argument(format!(
                        "asset '{}' of {} names no tensor",
                        a.filename,
                        dir.display()
                    )))
                }
            };
            let path = assets.join(&a.filename);
            Ok((
                name,
                Tensor::string_scalar(path.to_string_lossy().into_owned()),
            ))
        })
        .collect()
}

fn feed_refs(feeds: &[(String, Tensor)]) -> Vec<(&str, Tensor)> {
    feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect()
}

/// Runs the graph's restore op fed with `variables/variables` (and the assets),
/// as TensorFlow's `RunRestore`; a model without variables restores nothing.
fn restore_variables(
    session: &Session,
    mg: &MetaGraphDef,
    dir: &Path,
    assets: &[(String, Tensor)],
) -> Result<()> {
    let prefix = dir.join(VARIABLES_DIRECTORY).join(VARIABLES_FILENAME);
    let index = PathBuf::from(format!("{}.index", prefix.display()));
    let Some(saver) = mg
        .saver_def
        .as_ref()
        .filter(|s| !s.restore_op_name.is_empty())
    else {
        tracing::info!(export_dir = %dir.display(), "the SavedModel has no saver; no variables were restored");
        return Ok(());
    };
    if !index.is_file() {
        tracing::info!(
            export_dir = %dir.display(),
            "the SavedModel has no variables; no checkpoint was restored (no {})",
            index.display()
        );
        return Ok(());
    }
    let mut feeds = feed_refs(assets);
    feeds.push((
        saver.filename_tensor_name.as_str(),
        Tensor::string_scalar(prefix.to_string_lossy().into_owned()),
    ));
    session
        .run(&feeds, &[], &[saver.restore_op_name.as_str()])
        .map_err(|e| {
            e.context(format!(
                "restoring the variables of SavedModel {}",
                dir.display()
            ))
        })?;
    Ok(())
}

/// The op to run after restoring: TensorFlow 2's init signature, else the main
/// op, else the legacy init op (each a collection of exactly one node).
fn init_op(mg: &MetaGraphDef, dir: &Path) -> Result<Option<String>> {
    if let Some(sig) = mg.signature_def.get(INIT_OP_SIGNATURE_KEY) {
        let name = sig
            .outputs
            .get(INIT_OP_SIGNATURE_KEY)
            .and_then(|t| match &t.encoding {
                Some(graph::proto::tf::tensor_info::Encoding::Name(n)) => Some(n.clone()),
                _ => None,
            })
            .ok_or_else(|| {
                Status::failed_precondition(format!(
                    "the init op signature of {} has no output '{INIT_OP_SIGNATURE_KEY}'",
                    dir.display()
                ))
            })?;
        return Ok(Some(node_name(&name).to_owned()));
    }
    for key in [MAIN_OP_KEY, LEGACY_INIT_OP_KEY] {
        let Some(c) = mg.collection_def.get(key) else {
            continue;
        };
        return match &c.kind {
            Some(collection_def::Kind::NodeList(l)) if l.value.len() == 1 => {
                Ok(Some(node_name(&l.value[0]).to_owned()))
            }
            _ => Err(Status::failed_precondition(format!(
                "Expected exactly one main op in collection '{key}' of {}",
                dir.display()
            ))),
        };
    }
    Ok(None)
}

/// `name` of `name:0` or `^name`.
fn node_name(tensor: &str) -> &str {
    let t = tensor.strip_prefix('^').unwrap_or(tensor);
    match t.rsplit_once(':') {
        Some((n, i)) if i.parse::<usize>().is_ok() => n,
        _ => t,
    }
}

#[cfg(test)]
mod tests;
