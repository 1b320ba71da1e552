//! Names the sources the core is built from (`SOURCES`, a CRC-32 of `src/*.rs`, names and bytes,
//! in name order): `tuimon/engine/native.py` compares it with a checkout's `core/src` and reads with
//! Python, saying why, when the built core is not of those sources (a `git pull` without a rebuild:
//! the core's readers would be handed declarations they do not know, a traceback mid-read).

use std::{env, fs, path::Path};

fn crc32(mut crc: u32, bytes: &[u8]) -> u32 {
    // the reflected CRC-32 of zlib (polynomial 0xEDB88320), a bit at a time: a few hundred kB, once a build
    crc = !crc;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

fn main() {
    let dir = Path::new(&env::var("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("src");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .expect("core/src is there")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    names.sort();
    let mut crc = 0u32;
    for name in &names {
        crc = crc32(crc, name.as_bytes());
        crc = crc32(crc, b"\0");
        crc = crc32(crc, &fs::read(dir.join(name)).expect("a source file reads"));
        crc = crc32(crc, b"\0");
        println!("cargo:rerun-if-changed=src/{name}");
    }
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rustc-env=TUIMON_CORE_SOURCES={crc:08x}");
}
