//! The heaplab trace format (work in progress).
