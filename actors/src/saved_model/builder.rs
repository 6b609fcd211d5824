//! [`SavedModelBuilder`]: writes a SavedModel (TensorFlow's
//! `tf.compat.v1.saved_model.Builder`) from a graph under construction and the
//! session that holds its variables.
//!
//! Everything is written into a staging directory beside the export directory
//! and renamed into place by [`SavedModelBuilder::save`], so a failed or
//! abandoned export leaves no half-written model where a server would look.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use graph::builder::Scope;
use graph::import::graph_def_to_tf_proto;
use graph::proto::tf::{
    collection_def, meta_graph_def::MetaInfoDef, tensor_info, AssetFileDef, CollectionDef,
    MetaGraphDef, SavedModel as SavedModelProto, SaverDef, TensorInfo,
};
use graph::train::saver_graph::SaverNodes;
use graph::train::variables::{
    global_variables, GLOBAL_VARIABLES, LOCAL_VARIABLES, TRAINABLE_VARIABLES,
};
use graph::{DType, Result, Status, Tensor};
use kernels::cpu::checkpoint::atomic::write_atomically;
use prost::Message;

use super::{
    Signature, ASSETS_DIRECTORY, MAIN_OP_KEY, SAVED_MODEL_FILENAME_PB, SAVED_MODEL_SCHEMA_VERSION,
    VARIABLES_DIRECTORY, VARIABLES_FILENAME,
};
use crate::Session;

/// What a meta graph of a SavedModel records besides its graph.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct MetaGraphOptions {
    /// The signatures by key (`serving_default` is the one clients get by
    /// default).
    pub signatures: BTreeMap<String, Signature>,
    /// Asset files: each string tensor (`node:0`) the loader feeds with the
    /// path of the file, and the file to copy into `assets/`.
    pub assets: Vec<(String, PathBuf)>,
    /// The op a loader runs after restoring the variables (TensorFlow's
    /// `main_op`, e.g. a table initializer).
    pub main_op: Option<String>,
    /// Clear every node's device, so the model loads on any machine.
    pub clear_devices: bool,
}

impl MetaGraphOptions {
    graph::option_setters! {
        /// Sets [`main_op`](Self::main_op).
        with_main_op => main_op: Option<String>;
        /// Sets [`clear_devices`](Self::clear_devices).
        with_clear_devices => clear_devices: bool;
    }

    /// Adds signature `key`.
    pub fn with_signature(mut self, key: impl Into<String>, signature: Signature) -> Self {
        self.signatures.insert(key.into(), signature);
        self
    }

    /// Adds an asset: `tensor` is fed the path of `file`'s copy in `assets/`.
    pub fn with_asset(mut self, tensor: impl Into<String>, file: impl Into<PathBuf>) -> Self {
        self.assets.push((tensor.into(), file.into()));
        self
    }
}

/// Writes a SavedModel; see the module docs.
///
/// ```
/// use actorflow_actors::saved_model::{MetaGraphOptions, SavedModel, SavedModelBuilder, Signature, TensorSpec};
/// use actorflow_actors::{Session, SessionOptions};
/// use graph::builder::Scope;
/// use graph::{ops, train, DType, Shape, Tensor};
/// # fn main() -> graph::Result<()> {
/// let s = Scope::new();
/// let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None]))?;
/// let w = ops::Variable::new(&s, "w", &ops::constant(&s, Tensor::scalar(3.0f32))?, true)?;
/// let y = ops::mul(&s, &x, &w.value)?;
/// let init = train::global_variables_initializer(&s)?;
/// let sess = Session::new(&s.graph_def(), SessionOptions::default())?;
/// sess.run(&[], &[], &[init.name()])?;
///
/// let dir = tempfile::tempdir().unwrap();
/// let export = dir.path().join("1");
/// let mut b = SavedModelBuilder::new(&export)?;
/// let sig = Signature::new("tensorflow/serving/predict")
///     .input("x", TensorSpec::of(&x))
///     .output("y", TensorSpec::of(&y));
/// b.add_meta_graph_and_variables(&s, &sess, &["serve"], MetaGraphOptions::default().with_signature("serving_default", sig))?;
/// b.save()?;
///
/// let model = SavedModel::load(&export, &["serve"])?;
/// let out = model.run("serving_default", &[("x", Tensor::vector(&[1.0f32, 2.0]))])?;
/// assert_eq!(out["y"], Tensor::vector(&[3.0f32, 6.0]));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SavedModelBuilder {
    export_dir: PathBuf,
    staging: PathBuf,
    proto: SavedModelProto,
    /// The saver of the first meta graph and the nodes it saves.
    saver: Option<(SaverDef, Vec<String>)>,
    variables_saved: bool,
    saved: bool,
}

/// Makes staging directory names unique within the process.
static STAGING: AtomicUsize = AtomicUsize::new(0);

impl SavedModelBuilder {
    /// A builder exporting to `export_dir`, which must not exist or be empty
    /// (`AlreadyExists` otherwise, as in TensorFlow).
    pub fn new(export_dir: impl AsRef<Path>) -> Result<SavedModelBuilder> {
        let export_dir = export_dir.as_ref().to_path_buf();
        if let Ok(mut entries) = std::fs::read_dir(&export_dir) {
            if entries.next().is_some() {
                return Err(Status::already_exists(format!(
                    "Export directory already exists, and isn't empty. Please choose a different \
                     export directory, or delete all the contents of the specified directory: {}",
                    export_dir.display()
                )));
            }
        }
        let parent = match export_dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent)
            .map_err(|e| Status::from(e).context(format!("creating {}", parent.display())))?;
        let base = export_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "saved_model".into());
        let staging = parent.join(format!(
            ".{base}.tmp-{}-{}",
            std::process::id(),
            STAGING.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging)
            .map_err(|e| Status::from(e).context(format!("creating {}", staging.display())))?;
        Ok(SavedModelBuilder {
            export_dir,
            staging,
            proto: SavedModelProto {
                saved_model_schema_version: SAVED_MODEL_SCHEMA_VERSION,
                meta_graphs: vec![],
            },
            saver: None,
            variables_saved: false,
            saved: false,
        })
    }

    /// Adds the graph of `scope` tagged `tags` and saves the values its global
    /// variables hold in `session` into `variables/`. Builds the graph's save
    /// and restore nodes (under a `save` name scope) and adds them to `session`,
    /// so `session` must hold `scope`'s graph as it is now. Call it once, before
    /// any [`add_meta_graph`](Self::add_meta_graph).
    pub fn add_meta_graph_and_variables(
        &mut self,
        scope: &Scope,
        session: &Session,
        tags: &[&str],
        options: MetaGraphOptions,
    ) -> Result<()> {
        if self.variables_saved {
            return Err(Status::failed_precondition(
                "Graph state including variables and assets has already been saved. Please \
                 invoke `add_meta_graph()` instead.",
            ));
        }
        let vars = global_variables(scope)?;
        let variables_dir = self.staging.join(VARIABLES_DIRECTORY);
        std::fs::create_dir_all(&variables_dir).map_err(|e| {
            Status::from(e).context(format!("creating {}", variables_dir.display()))
        })?;
        let saver_def = if vars.is_empty() {
            None
        } else {
            let before: HashSet<String> =
                scope.graph_def().node.into_iter().map(|n| n.name).collect();
            let nodes = SaverNodes::build(scope, &vars, "save")?;
            let mut added = scope.graph_def();
            added.node.retain(|n| !before.contains(&n.name));
            session.extend(&added)?;
            let prefix = variables_dir.join(VARIABLES_FILENAME);
            let path = Tensor::string_scalar(prefix.to_string_lossy().into_owned());
            session
                .run(
                    &[(nodes.filename.name().as_str(), path)],
                    &[nodes.save.name().as_str()],
                    &[],
                )
                .map_err(|e| e.context("saving the variables of the SavedModel"))?;
            let def = nodes.saver_def(5);
            let names = nodes
                .variables
                .iter()
                .map(|v| v.name().to_owned())
                .collect();
            self.saver = Some((def.clone(), names));
            Some(def)
        };
        self.variables_saved = true;
        self.push_meta_graph(scope, tags, saver_def, options)
    }

    /// Adds the graph of `scope` tagged `tags`, sharing the variables saved by
    /// [`add_meta_graph_and_variables`](Self::add_meta_graph_and_variables)
    /// (`FailedPrecondition` before it). The graph's saver is the first one
    /// when `scope` still has its nodes, else one built now (not run).
    pub fn add_meta_graph(
        &mut self,
        scope: &Scope,
        tags: &[&str],
        options: MetaGraphOptions,
    ) -> Result<()> {
        if !self.variables_saved {
            return Err(Status::failed_precondition(
                "Graph state including variables and assets has not been saved yet. Please \
                 invoke `add_meta_graph_and_variables()` first.",
            ));
        }
        let saver_def = match &self.saver {
            Some((def, _)) if scope.find_operation(&def.restore_op_name).is_some() => {
                Some(def.clone())
            }
            Some((_, names)) => {
                let vars = names
                    .iter()
                    .map(|n| graph::train::VarRef::from_name(scope, n))
                    .collect::<Result<Vec<_>>>()?;
                Some(SaverNodes::build(scope, &vars, "save")?.saver_def(5))
            }
            None => None,
        };
        self.push_meta_graph(scope, tags, saver_def, options)
    }

    fn push_meta_graph(
        &mut self,
        scope: &Scope,
        tags: &[&str],
        saver_def: Option<SaverDef>,
        options: MetaGraphOptions,
    ) -> Result<()> {
        let mut seen = HashSet::new();
        for mg in &self.proto.meta_graphs {
            let t: std::collections::BTreeSet<&str> = mg
                .meta_info_def
                .iter()
                .flat_map(|m| m.tags.iter().map(String::as_str))
                .collect();
            seen.insert(t.into_iter().collect::<Vec<_>>().join(","));
        }
        let mut sorted: Vec<&str> = tags.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if !seen.insert(sorted.join(",")) {
            return Err(Status::already_exists(format!(
                "a meta graph tagged {{ {} }} was already added",
                sorted.join(" ")
            )));
        }
        let mut meta = meta_graph_def(scope, tags, saver_def, &options)?;
        meta.asset_file_def = self.copy_assets(&options.assets)?;
        self.proto.meta_graphs.push(meta);
        Ok(())
    }

    /// Copies each asset file into `assets/` (once per file name).
    fn copy_assets(&self, assets: &[(String, PathBuf)]) -> Result<Vec<AssetFileDef>> {
        let mut defs = Vec::with_capacity(assets.len());
        for (tensor, file) in assets {
            let def = asset_file_def(tensor, file)?;
            let dir = self.staging.join(ASSETS_DIRECTORY);
            std::fs::create_dir_all(&dir)
                .map_err(|e| Status::from(e).context(format!("creating {}", dir.display())))?;
            let dest = dir.join(&def.filename);
            if !dest.exists() {
                std::fs::copy(file, &dest).map_err(|e| {
                    Status::from(e).context(format!("copying asset {}", file.display()))
                })?;
            }
            defs.push(def);
        }
        Ok(defs)
    }

    /// Writes `saved_model.pb` and moves the model into the export directory;
    /// returns that directory. At least one meta graph must have been added.
    pub fn save(mut self) -> Result<PathBuf> {
        if self.proto.meta_graphs.is_empty() {
            return Err(Status::failed_precondition(
                "no meta graph was added to the SavedModel",
            ));
        }
        let bytes = self.proto.encode_to_vec();
        write_atomically(&self.staging.join(SAVED_MODEL_FILENAME_PB), false, |w| {
            Ok(std::io::Write::write_all(w, &bytes)?)
        })?;
        // An empty export directory (allowed by `new`) is replaced.
        if self.export_dir.is_dir() {
            std::fs::remove_dir(&self.export_dir).map_err(|e| {
                Status::from(e).context(format!("replacing {}", self.export_dir.display()))
            })?;
        }
        std::fs::rename(&self.staging, &self.export_dir).map_err(|e| {
            Status::from(e).context(format!(
                "moving the SavedModel into {}",
                self.export_dir.display()
            ))
        })?;
        self.saved = true;
        tracing::info!(export_dir = %self.export_dir.display(), "SavedModel written");
        Ok(self.export_dir.clone())
    }
}

impl Drop for SavedModelBuilder {
    fn drop(&mut self) {
        if !self.saved {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
    }
}

/// The `MetaGraphDef` of `scope`'s graph as it is now, tagged `tags`: the
/// graph, `saver_def`, the scope's collections (but the variable collections,
/// which TensorFlow records as `VariableDef`s that a loader rebuilds Python
/// objects from, and which no loader needs to restore or serve), the main op,
/// the signatures and the assets of `options` (`AssetFileDef`s naming each
/// file's base name; copying the files is the caller's part). What a
/// checkpoint's `.meta` file and each meta graph of a SavedModel hold. A main
/// op or signature tensor missing from the graph is `NotFound`.
pub fn meta_graph_def(
    scope: &Scope,
    tags: &[&str],
    saver_def: Option<SaverDef>,
    options: &MetaGraphOptions,
) -> Result<MetaGraphDef> {
    let mut graph_def = graph_def_to_tf_proto(&scope.graph_def());
    if options.clear_devices {
        for n in &mut graph_def.node {
            n.device.clear();
        }
    }
    let mut collection_def = BTreeMap::new();
    for (key, names) in scope.collections() {
        if [GLOBAL_VARIABLES, TRAINABLE_VARIABLES, LOCAL_VARIABLES].contains(&key.as_str()) {
            continue;
        }
        collection_def.insert(key, node_list(names));
    }
    if let Some(op) = &options.main_op {
        if scope.find_operation(op).is_none() {
            return Err(Status::not_found(format!(
                "the main op '{op}' is not in the graph"
            )));
        }
        collection_def.insert(MAIN_OP_KEY.to_owned(), node_list(vec![op.clone()]));
    }
    for (k, sig) in &options.signatures {
        for (what, specs) in [("input", &sig.inputs), ("output", &sig.outputs)] {
            for (key, spec) in specs {
                let node = spec.name.split(':').next().unwrap_or_default();
                if scope.find_operation(node).is_none() {
                    return Err(Status::not_found(format!(
                        "{what} '{key}' of signature '{k}' names tensor '{}', which is not in the graph",
                        spec.name
                    )));
                }
            }
        }
    }
    let asset_file_def = options
        .assets
        .iter()
        .map(|(tensor, file)| asset_file_def(tensor, file))
        .collect::<Result<Vec<_>>>()?;
    Ok(MetaGraphDef {
        meta_info_def: Some(MetaInfoDef {
            meta_graph_version: format!("actorflow {}", env!("CARGO_PKG_VERSION")),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            ..MetaInfoDef::default()
        }),
        graph_def: Some(graph_def),
        saver_def,
        collection_def,
        signature_def: options
            .signatures
            .iter()
            .map(|(k, s)| (k.clone(), s.to_proto()))
            .collect(),
        asset_file_def,
    })
}

/// Writes `meta` to `path` in binary form, atomically (a checkpoint's `.meta`
/// file).
pub fn write_meta_graph(path: &Path, meta: &MetaGraphDef) -> Result<()> {
    let bytes = meta.encode_to_vec();
    write_atomically(path, false, |w| Ok(std::io::Write::write_all(w, &bytes)?))
}

/// Reads a binary `MetaGraphDef` (a checkpoint's `.meta` file, written by
/// actorflow or TensorFlow); a damaged file is `DataLoss` naming it.
pub fn read_meta_graph(path: &Path) -> Result<MetaGraphDef> {
    let bytes = std::fs::read(path)
        .map_err(|e| Status::from(e).context(format!("reading {}", path.display())))?;
    MetaGraphDef::decode(bytes.as_slice()).map_err(|e| {
        Status::data_loss(format!(
            "cannot parse {} as a MetaGraphDef: {e}",
            path.display()
        ))
    })
}

/// The `AssetFileDef` of `file` fed to `tensor`: the file's base name.
fn asset_file_def(tensor: &str, file: &Path) -> Result<AssetFileDef> {
    let filename = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            Status::invalid_argument(format!("asset '{}' is not a file", file.display()))
        })?;
    Ok(AssetFileDef {
        tensor_info: Some(TensorInfo {
            encoding: Some(tensor_info::Encoding::Name(tensor.to_owned())),
            dtype: DType::String.tf_enum(),
            tensor_shape: Some(Default::default()),
        }),
        filename,
    })
}

fn node_list(names: Vec<String>) -> CollectionDef {
    CollectionDef {
        kind: Some(collection_def::Kind::NodeList(collection_def::NodeList {
            value: names,
        })),
    }
}
