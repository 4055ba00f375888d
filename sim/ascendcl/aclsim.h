// The simulated libascendcl: the extension functions tests call next to the AscendCL API.
//
// The simulator (ascendcl_sim.cc, built as lib64/libascendcl.so under the build tree) exports
// the AscendCL entry points mmserve declares in src/runtime/acl/acl_api.h, with the documented
// semantics that matter to a server (shared/reference/ascendcl.md):
//
//   process     aclInit once (a second call → 100002), or reference-counted with
//               aclFinalizeReference (option refcounted_init); never again after the process
//               finalized (100002); every call but aclrtGetSocName and aclrtGetDeviceCount needs
//               aclInit (100001)
//   threads     aclrtSetDevice / aclrtCreateContext / aclrtSetCurrentContext bind the calling
//               thread; calls that need a context fail with 107002 on a thread without one; a
//               stream used from another context → 107003, a model → 107004; a context with
//               streams or models left cannot be destroyed (148051)
//   memory      each device has a fixed capacity (option memory_mb); aclrtMalloc and model
//               loads beyond it fail with 207001 and an EL0004 message; other processes may
//               hold part of it (option others_mb); aclrtGetMemInfo; a
//               load takes load_charge × what aclmdlQuerySize says (default 1.0)
//   models      "OM" files in the simulator's own format (below); a model compiled for another
//               SoC fails to load with 507008 and EE1001's text; aclmdlQuerySize; dynamic batch
//               gears; aclmdlExecuteAsync queues a task that completes `latency` later, computing
//               its outputs only then (at aclrtSynchronizeStreamWithTimeout); a task whose first
//               input holds `hang_on` never completes: the sync returns 507046 at its timeout;
//               one whose first input holds fail_on.value fails with fail_on.code; with
//               serial_device, a device runs one task at a time (across its streams), so the
//               OM's latency_us + latency_per_item_us x batch is a card's cost model
//   record      every call, with its arguments, the calling thread's context and the result
//
// The OM format (a text file; real OM files are not readable without CANN):
//
//   ACLSIM-OM 1
//   {"soc_version": "Ascend310P3",
//    "inputs":  [{"name": "x", "datatype": "FLOAT", "dims": [-1, 4]}],
//    "outputs": [{"name": "y", "datatype": "FLOAT", "dims": [-1, 4]}],
//    "dynamic_batch": [1, 2, 4, 8],        # gears (ATC --dynamic_batch_size); dims[0] is -1
//    "work_size": 1048576, "weight_size": 4194304,
//    "scale": 2.0, "bias": 1.0,            # output k, row b, element j:
//                                          #   scale * input0[b][j mod row0] + bias + k
//    "latency_us": 0, "latency_per_item_us": 0, "hang_on": 666.0,
//    "fail_on": {"value": 207.0, "code": 207001}}
//
// Datatypes are ACL's names: FLOAT, FLOAT16, INT8, INT32, UINT8, INT16, UINT16, UINT32, INT64,
// UINT64, DOUBLE, BOOL, BF16 (FLOAT16/BF16 outputs are filled with zeros).
//
// Options come from the environment when the library is first used (ACLSIM_SOC, ACLSIM_DEVICES,
// ACLSIM_MEMORY_MB, ACLSIM_REFCOUNTED_INIT, ACLSIM_DESC_FROM_FILE=0, ACLSIM_LOAD_CHARGE, ACLSIM_OTHERS_MB,
// ACLSIM_SERIAL_DEVICE=1,
// ACLSIM_TRACE=file: every
// record line is also appended there) and from aclsimReset's JSON.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// Drops every process-level state (as a fresh process), then applies `options_json` (NULL or a
// JSON object with any of: soc, devices, memory_mb, refcounted_init, desc_from_file,
// load_charge, others_mb, serial_device) over the
// environment's options. Threads keep no context across a reset.
void aclsimReset(const char* options_json);

// The call record: "aclmdlLoadFromFile path=/m/a.om model=1 ctx=ctx3 tid=2 -> 0".
size_t aclsimRecordCount(void);
const char* aclsimRecordLine(size_t index);  // valid until the next simulator call

// Bytes allocated on `device` now (aclrtMalloc plus model work and weight memory).
size_t aclsimDeviceUsed(int32_t device);
}
