//! Waiting for CustomResourceDefinitions: the one copy every test uses.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionCondition,
};
use kube::Client;
use kube::api::Api;

use crate::error::Error;

/// How long a CRD may take to become Established; generous because the API
/// server shares two cores with cargo.
pub const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(60);

fn conditions_of(crd: Option<&CustomResourceDefinition>) -> Vec<CustomResourceDefinitionCondition> {
    crd.and_then(|c| c.status.as_ref())
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

fn is_true(conditions: &[CustomResourceDefinitionCondition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// Waits until each named CRD is Established (its resources are served) and
/// fails when its schema is not structural; the error carries the CRD's last
/// conditions. Polls: a watch would need kube's runtime feature for one loop.
pub async fn wait_established(client: &Client, names: &[&str]) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in names {
        let deadline = Instant::now() + ESTABLISHED_TIMEOUT;
        loop {
            let conditions = conditions_of(api.get_opt(name).await?.as_ref());
            if is_true(&conditions, "NonStructuralSchema") {
                return Err(Error::Crd(format!("{name}: {conditions:?}")));
            }
            if is_true(&conditions, "Established") {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::Crd(format!(
                    "{name} not Established after {}s: {conditions:?}",
                    ESTABLISHED_TIMEOUT.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}
