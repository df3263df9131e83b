//! Device errors as Python exceptions: one class per [`ErrorKind`], each
//! a subclass of `PldError`, in `pld_pypto.errors` — so that a program
//! catches the failure it can handle (`except pld.errors.WaitTimeout`)
//! and the message still says why and the fix.

use crate::PldError;
use pld_sim::ErrorKind;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use std::ffi::CString;

/// The classes, in the order of `ErrorKind::ALL`.
static CLASSES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&Vec<Py<PyType>>> {
    CLASSES.get_or_try_init(py, || {
        let base = py.get_type::<PldError>();
        ErrorKind::ALL
            .iter()
            .map(|k| {
                let name = CString::new(format!("pld_pypto.errors.{}", k.name()))
                    .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
                PyErr::new_type(py, &name, None, Some(&base), None)
            })
            .collect()
    })
}

/// A device error as the exception of its kind.
pub(crate) fn device_err(e: pld_sim::Error) -> PyErr {
    let kind = e.kind();
    Python::attach(|py| match classes(py) {
        Ok(c) => match ErrorKind::ALL.iter().position(|k| *k == kind) {
            Some(i) => PyErr::from_type(c[i].bind(py).clone(), e.to_string()),
            None => PldError::new_err(e.to_string()),
        },
        Err(err) => err,
    })
}

/// Adds every class to the module, and `ERROR_KINDS`, their names.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    for (k, c) in ErrorKind::ALL.iter().zip(classes(py)?) {
        m.add(k.name(), c.bind(py))?;
    }
    let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
    m.add("ERROR_KINDS", names)?;
    Ok(())
}
