//! Certificates for one environment, made with rcgen: one CA that signs both the
//! serving certificate and the admin client certificate (envtest uses three CAs;
//! one is enough when nothing else trusts it), plus the service-account key pair.
//! ECDSA P-256 throughout, like envtest's tinyca, because it is fast to generate.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::error::Error;

/// Where the PEM files of one environment live.
#[derive(Debug, Clone)]
pub(crate) struct CertFiles {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub sa_public: PathBuf,
    pub sa_private: PathBuf,
}

fn write(path: &Path, pem: &str) -> Result<(), Error> {
    std::fs::write(path, pem).map_err(Error::io(format!("writing {}", path.display())))
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    if let Some(o) = organization {
        dn.push(DnType::OrganizationName, o);
    }
    dn.push(DnType::CommonName, common_name);
    dn
}

/// Generates the PKI into `dir` and returns the file paths.
pub(crate) fn generate(dir: &Path) -> Result<CertFiles, Error> {
    let files = CertFiles {
        ca_cert: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        admin_cert: dir.join("admin.crt"),
        admin_key: dir.join("admin.key"),
        sa_public: dir.join("sa.pub"),
        sa_private: dir.join("sa.key"),
    };

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name = name("gpuready-testenv-ca", Some("gpuready-testenv"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, &ca_key);
    write(&files.ca_cert, &ca_cert.pem())?;

    // The apiserver is reached as https://127.0.0.1:<port>; localhost is there for
    // tools that prefer names.
    let serving_key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
    serving.distinguished_name = name("localhost", None);
    serving.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    write(
        &files.serving_cert,
        &serving.signed_by(&serving_key, &issuer)?.pem(),
    )?;
    write(&files.serving_key, &serving_key.serialize_pem())?;

    // system:masters bypasses RBAC, so the admin can install CRDs and impersonate.
    let admin_key = KeyPair::generate()?;
    let mut admin = CertificateParams::new(Vec::<String>::new())?;
    admin.distinguished_name = name("admin", Some("system:masters"));
    admin.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    write(
        &files.admin_cert,
        &admin.signed_by(&admin_key, &issuer)?.pem(),
    )?;
    write(&files.admin_key, &admin_key.serialize_pem())?;

    // Service-account tokens: the apiserver signs with the private key and
    // verifies with the public one (PKCS#8 and SPKI PEM, both accepted).
    let sa_key = KeyPair::generate()?;
    write(&files.sa_private, &sa_key.serialize_pem())?;
    write(&files.sa_public, &sa_key.public_key_pem())?;

    Ok(files)
}
