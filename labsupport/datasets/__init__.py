"""The data the package ships (package data, read by `labsupport.data`): see README.md here."""
