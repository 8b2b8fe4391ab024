//! TorchScript `.pt` archives: the zip, its entries and storages.
