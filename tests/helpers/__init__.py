"""What several test modules share (importable as ``helpers.<module>`` from every folder of tests/:
pytest puts tests/, the folder of the rootmost conftest, on sys.path):

- op_calls: OpCall / call, bad_input_tests, requires_native, native_available
- processes: run_python and the Numba compile-count probes
- jpeg_photos, jpeg_samples: photos and JPEGs of every kind the decoders meet
- source_checks, foreign_steps, torchvision_resize_checks: shared checks of the sources and transforms
- s3_server, store_servers, fault_proxy, pack_http_server, remote_guard: the loopback stores, the fault
  proxy in front of them and the remote tests' hang guard
- fused_spies, decode_split, color_refs, crop_draws, dataloaders: what the op, transform and Loader tests
  share (spies on the fused path, pipelines, references)
- user_transform: the user transform module `bench --data` measures (tools/conftest.py)
"""
