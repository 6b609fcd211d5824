//! [`ClusterSpec`]: the tasks of a cluster and their addresses (TensorFlow's
//! `ClusterDef`/`tf.train.ClusterSpec`), parsed from the command line's
//! `--cluster job=host:port,host:port` flags.

use std::collections::BTreeMap;

use graph::{Result, Status};

/// One task of a cluster.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskName {
    /// The job (`worker`, `ps`, …).
    pub job: String,
    /// The task's index in its job.
    pub task: u32,
}

impl TaskName {
    /// A task.
    pub fn new(job: impl Into<String>, task: u32) -> TaskName {
        TaskName {
            job: job.into(),
            task,
        }
    }

    /// The prefix of its devices' names: `/job:J/replica:0/task:T`.
    pub fn device_prefix(&self) -> String {
        format!("/job:{}/replica:0/task:{}", self.job, self.task)
    }

    /// The task a full device name (`/job:J/replica:R/task:T/device:…`) belongs to.
    pub fn of_device(device: &str) -> Result<TaskName> {
        let d = graph::DeviceName::parse(device)?;
        match (d.job, d.task) {
            (Some(job), Some(task)) => Ok(TaskName { job, task }),
            _ => Err(Status::invalid_argument(format!(
                "'{device}' does not name a job and a task"
            ))),
        }
    }
}

impl std::fmt::Display for TaskName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "/job:{}/replica:0/task:{}", self.job, self.task)
    }
}

/// The tasks of a cluster, by job and index, with their `host:port` addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterSpec {
    jobs: BTreeMap<String, BTreeMap<u32, String>>,
}

impl ClusterSpec {
    /// An empty cluster.
    pub fn new() -> ClusterSpec {
        ClusterSpec::default()
    }

    /// Adds a job whose tasks 0, 1, … listen on `addresses`.
    pub fn with_job<S: AsRef<str>>(mut self, job: &str, addresses: &[S]) -> Result<ClusterSpec> {
        self.add_job(job, addresses)?;
        Ok(self)
    }

    fn add_job<S: AsRef<str>>(&mut self, job: &str, addresses: &[S]) -> Result<()> {
        if job.is_empty() || !job.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Status::invalid_argument(format!(
                "invalid job name '{job}': letters, digits and '_' only"
            )));
        }
        if self.jobs.contains_key(job) {
            return Err(Status::invalid_argument(format!(
                "job '{job}' is defined twice"
            )));
        }
        let mut tasks = BTreeMap::new();
        for (i, a) in addresses.iter().enumerate() {
            let a = a.as_ref().trim();
            check_address(a)?;
            tasks.insert(i as u32, a.to_owned());
        }
        if tasks.is_empty() {
            return Err(Status::invalid_argument(format!(
                "job '{job}' has no tasks"
            )));
        }
        self.jobs.insert(job.to_owned(), tasks);
        Ok(())
    }

    /// Parses `--cluster` values, each `job=host:port[,host:port…]`.
    pub fn parse<S: AsRef<str>>(jobs: &[S]) -> Result<ClusterSpec> {
        let mut spec = ClusterSpec::new();
        for j in jobs {
            let j = j.as_ref();
            let (name, addrs) = j.split_once('=').ok_or_else(|| {
                Status::invalid_argument(format!(
                    "invalid cluster job '{j}': expected job=host:port[,host:port…]"
                ))
            })?;
            let addrs: Vec<&str> = addrs.split(',').collect();
            spec.add_job(name.trim(), &addrs)?;
        }
        Ok(spec)
    }

    /// The address of a task.
    pub fn address(&self, task: &TaskName) -> Result<&str> {
        self.jobs
            .get(&task.job)
            .and_then(|t| t.get(&task.task))
            .map(String::as_str)
            .ok_or_else(|| Status::not_found(format!("{task} is not in the cluster")))
    }

    /// Every task, in job and index order.
    pub fn tasks(&self) -> Vec<TaskName> {
        self.jobs
            .iter()
            .flat_map(|(j, t)| t.keys().map(|&i| TaskName::new(j.clone(), i)))
            .collect()
    }

    /// The jobs' names.
    pub fn jobs(&self) -> impl Iterator<Item = &str> {
        self.jobs.keys().map(String::as_str)
    }

    /// TensorFlow's `ClusterDef` of this cluster.
    pub fn to_proto(&self) -> proto::tensorflow::ClusterDef {
        proto::tensorflow::ClusterDef {
            job: self
                .jobs
                .iter()
                .map(|(name, tasks)| proto::tensorflow::JobDef {
                    name: name.clone(),
                    tasks: tasks.iter().map(|(&i, a)| (i as i32, a.clone())).collect(),
                })
                .collect(),
        }
    }

    /// The cluster a `ClusterDef` describes.
    pub fn from_proto(def: &proto::tensorflow::ClusterDef) -> Result<ClusterSpec> {
        let mut spec = ClusterSpec::new();
        for j in &def.job {
            let mut tasks = BTreeMap::new();
            for (&i, a) in &j.tasks {
                let i = u32::try_from(i).map_err(|_| {
                    Status::invalid_argument(format!("job '{}' has task index {i}", j.name))
                })?;
                check_address(a)?;
                tasks.insert(i, a.clone());
            }
            spec.jobs.insert(j.name.clone(), tasks);
        }
        Ok(spec)
    }
}

fn check_address(a: &str) -> Result<()> {
    let ok = a
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
    if ok {
        Ok(())
    } else {
        Err(Status::invalid_argument(format!(
            "invalid task address '{a}': expected host:port"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_jobs_and_names_tasks() {
        let c = ClusterSpec::parse(&["worker=127.0.0.1:2222,127.0.0.1:2223", "ps=localhost:9"])
            .unwrap();
        assert_eq!(
            c.tasks(),
            vec![
                TaskName::new("ps", 0),
                TaskName::new("worker", 0),
                TaskName::new("worker", 1)
            ]
        );
        assert_eq!(
            c.address(&TaskName::new("worker", 1)).unwrap(),
            "127.0.0.1:2223"
        );
        assert!(c.address(&TaskName::new("worker", 2)).is_err());
        assert_eq!(ClusterSpec::from_proto(&c.to_proto()).unwrap(), c);
        let t = TaskName::of_device("/job:ps/replica:0/task:0/device:CPU:1").unwrap();
        assert_eq!(t, TaskName::new("ps", 0));
        assert_eq!(t.device_prefix(), "/job:ps/replica:0/task:0");
    }

    #[test]
    fn bad_specs_are_errors() {
        for bad in [
            &["worker"][..],
            &["worker="],
            &["worker=host"],
            &["worker=host:notaport"],
            &["w-x=h:1"],
            &["w=h:1", "w=h:2"],
        ] {
            let e = ClusterSpec::parse(bad).unwrap_err();
            assert_eq!(e.code(), graph::Code::InvalidArgument, "{bad:?}: {e}");
        }
    }
}
