/*
 * nvml_abi.h — the part of NVIDIA's Management Library (NVML) ABI that trainprof uses,
 * declared here so that libtrainprof needs neither nvml.h to build nor libnvidia-ml to
 * link (docs/design.md §6.6; nvtop and DCGM's loader do the same). libnvidia-ml.so.1 is dlopen'ed
 * at run time by capture/nvml.c, and every entry point is reached through the function
 * table below.
 *
 * Only facts are declared: enum values, struct layouts and signatures as NVML documents them
 * (NVML API reference; nvml.h as DCGM's sdk/nvidia/nvml ships it). The sizes are checked at
 * compile time, so a typo in a layout fails the build rather than a GPU run.
 * Enums are declared as int (their size in the NVML ABI), so no C enum sizing question
 * arises across compilers. This header is also used by the test suite's fake libnvidia-ml.
 */
#ifndef TPROF_NVML_ABI_H
#define TPROF_NVML_ABI_H

#include <stddef.h>

/* ------------------------------------------------------------------ basic types */

typedef int nvmlReturn_t;                   /* enum nvmlReturn_enum */
typedef struct nvmlDevice_st *nvmlDevice_t; /* opaque handle owned by NVML */
typedef int nvmlClockType_t;                /* enum nvmlClockType_enum */
typedef int nvmlTemperatureSensors_t;       /* enum nvmlTemperatureSensors_enum */
typedef int nvmlValueType_t;                /* enum nvmlValueType_enum */

/* nvmlReturn_t values used by trainprof */
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_LIBRARY_NOT_FOUND 12
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_UNKNOWN 999

/* nvmlInitWithFlags: do not fail when the machine has a driver but no GPU */
#define NVML_INIT_FLAG_NO_GPUS 1u

/* nvmlClockType_t */
#define NVML_CLOCK_GRAPHICS 0
#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2
#define NVML_CLOCK_VIDEO 3

/* nvmlDeviceGetMigMode's current mode */
#define NVML_DEVICE_MIG_ENABLE 1u

/* nvmlTemperatureSensors_t */
#define NVML_TEMPERATURE_GPU 0

/* Buffer sizes NVML guarantees to be large enough (the _V2 sizes are the current ones). */
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* ------------------------------------------------------------------ structs */

/* nvmlDeviceGetUtilizationRates: percent of the last sample period (1/6 s to 1 s by product)
 * in which a kernel ran (gpu) / device memory was read or written (memory). */
typedef struct nvmlUtilization_st {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

/* nvmlDeviceGetMemoryInfo (v1), bytes. "used" sums every process's allocations. */
typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

/* nvmlDeviceGetPciInfo_v3 / _v2 (same layout). */
typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "domain:bus:device.function" */
} nvmlPciInfo_t;

/* nvmlValueType_t */
#define NVML_VALUE_TYPE_DOUBLE 0
#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_VALUE_TYPE_UNSIGNED_LONG 2
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3
#define NVML_VALUE_TYPE_SIGNED_LONG_LONG 4
#define NVML_VALUE_TYPE_SIGNED_INT 5
#define NVML_VALUE_TYPE_UNSIGNED_SHORT 6

typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

/* nvmlDeviceGetFieldValues: the caller fills fieldId and scopeId; NVML fills the rest and a
 * per-field nvmlReturn, which must be checked before value is read. */
typedef struct nvmlFieldValue_st {
    unsigned int fieldId;
    unsigned int scopeId;     /* power fields: 0 = GPU only, 1 = module (e.g. with Grace) */
    long long timestamp;      /* CPU time of the value, microseconds since 1970 */
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

/* Field ids (each is fixed forever by NVML). Power fields are in milliwatts. */
#define NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION 83 /* mJ since the driver was loaded */
#define NVML_FI_DEV_POWER_AVERAGE 185           /* 1 s average; Ampere (not GA100) and newer */
#define NVML_FI_DEV_POWER_INSTANT 186           /* current power, all architectures */

/* Clock event (formerly "throttle") reasons: the bitmask of
 * nvmlDeviceGetCurrentClocksEventReasons / nvmlDeviceGetCurrentClocksThrottleReasons.
 * Several bits may be set at once; new bits may appear in later drivers. */
#define NVML_CLOCKS_EVENT_GPU_IDLE 0x1ull
#define NVML_CLOCKS_EVENT_APPLICATIONS_CLOCKS_SETTING 0x2ull
#define NVML_CLOCKS_EVENT_SW_POWER_CAP 0x4ull
#define NVML_CLOCKS_EVENT_HW_SLOWDOWN 0x8ull
#define NVML_CLOCKS_EVENT_SYNC_BOOST 0x10ull
#define NVML_CLOCKS_EVENT_SW_THERMAL_SLOWDOWN 0x20ull
#define NVML_CLOCKS_EVENT_HW_THERMAL_SLOWDOWN 0x40ull
#define NVML_CLOCKS_EVENT_HW_POWER_BRAKE_SLOWDOWN 0x80ull
#define NVML_CLOCKS_EVENT_DISPLAY_CLOCK_SETTING 0x100ull

/* The layouts NVML documents, checked on this compiler (x86-64 and aarch64 LP64). */
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t layout");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t layout");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
_Static_assert(sizeof(nvmlValue_t) == 8, "nvmlValue_t layout");
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t layout");
_Static_assert(offsetof(nvmlFieldValue_t, value) == 32, "nvmlFieldValue_t layout");

/* ------------------------------------------------------------------ entry points */

/* X(return type, name, parameter list, required). A required symbol missing from the library
 * makes NVML unavailable; an optional one only turns its metric off. Where NVML renamed or
 * versioned a call, both names are listed and the loader takes the newest one present. */
#define TPROF_NVML_FUNCTIONS(X)                                                               \
    X(nvmlReturn_t, nvmlInit_v2, (void), 0)                                                  \
    X(nvmlReturn_t, nvmlInit, (void), 0)                                                     \
    X(nvmlReturn_t, nvmlInitWithFlags, (unsigned int flags), 0)                              \
    X(nvmlReturn_t, nvmlShutdown, (void), 1)                                                 \
    X(const char *, nvmlErrorString, (nvmlReturn_t result), 1)                               \
    X(nvmlReturn_t, nvmlSystemGetDriverVersion, (char *version, unsigned int length), 0)    \
    X(nvmlReturn_t, nvmlDeviceGetCount_v2, (unsigned int *count), 0)                         \
    X(nvmlReturn_t, nvmlDeviceGetCount, (unsigned int *count), 0)                            \
    X(nvmlReturn_t, nvmlDeviceGetHandleByIndex_v2, (unsigned int index, nvmlDevice_t *dev), 0) \
    X(nvmlReturn_t, nvmlDeviceGetHandleByIndex, (unsigned int index, nvmlDevice_t *dev), 0)  \
    X(nvmlReturn_t, nvmlDeviceGetHandleByUUID, (const char *uuid, nvmlDevice_t *dev), 0)     \
    X(nvmlReturn_t, nvmlDeviceGetUUID, (nvmlDevice_t dev, char *uuid, unsigned int length), 1) \
    X(nvmlReturn_t, nvmlDeviceGetName, (nvmlDevice_t dev, char *name, unsigned int length), 0) \
    X(nvmlReturn_t, nvmlDeviceGetPciInfo_v3, (nvmlDevice_t dev, nvmlPciInfo_t *pci), 0)      \
    X(nvmlReturn_t, nvmlDeviceGetPciInfo_v2, (nvmlDevice_t dev, nvmlPciInfo_t *pci), 0)      \
    /* millijoules since the driver was (re)loaded; Volta and newer; can take milliseconds */ \
    X(nvmlReturn_t, nvmlDeviceGetTotalEnergyConsumption,                                     \
      (nvmlDevice_t dev, unsigned long long *energy_mj), 0)                                  \
    /* milliwatts: a 1 s average on Ampere (except GA100) and newer, instantaneous before */ \
    X(nvmlReturn_t, nvmlDeviceGetPowerUsage, (nvmlDevice_t dev, unsigned int *power_mw), 0)  \
    X(nvmlReturn_t, nvmlDeviceGetFieldValues,                                                \
      (nvmlDevice_t dev, int count, nvmlFieldValue_t *values), 0)                            \
    X(nvmlReturn_t, nvmlDeviceGetUtilizationRates, (nvmlDevice_t dev, nvmlUtilization_t *u), 0) \
    X(nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t dev, nvmlMemory_t *mem), 0)       \
    /* MHz */                                                                                \
    X(nvmlReturn_t, nvmlDeviceGetClockInfo,                                                  \
      (nvmlDevice_t dev, nvmlClockType_t type, unsigned int *mhz), 0)                        \
    X(nvmlReturn_t, nvmlDeviceGetMaxClockInfo,                                               \
      (nvmlDevice_t dev, nvmlClockType_t type, unsigned int *mhz), 0)                        \
    /* degrees C */                                                                          \
    X(nvmlReturn_t, nvmlDeviceGetTemperature,                                                \
      (nvmlDevice_t dev, nvmlTemperatureSensors_t sensor, unsigned int *temp_c), 0)          \
    /* milliwatts */                                                                         \
    X(nvmlReturn_t, nvmlDeviceGetEnforcedPowerLimit, (nvmlDevice_t dev, unsigned int *mw), 0) \
    /* the newer name (drivers from 535 on) and the older one, same signature */             \
    X(nvmlReturn_t, nvmlDeviceGetCurrentClocksEventReasons,                                  \
      (nvmlDevice_t dev, unsigned long long *reasons), 0)                                    \
    X(nvmlReturn_t, nvmlDeviceGetCurrentClocksThrottleReasons,                               \
      (nvmlDevice_t dev, unsigned long long *reasons), 0)                                    \
    /* MIG (Ampere and newer; NVML from R450): a GPU's mode, its MIG devices, a MIG device's \
     * GPU. A MIG device's handle comes from nvmlDeviceGetHandleByUUID("MIG-...") too. */   \
    X(nvmlReturn_t, nvmlDeviceGetMigMode,                                                    \
      (nvmlDevice_t dev, unsigned int *current, unsigned int *pending), 0)                   \
    X(nvmlReturn_t, nvmlDeviceGetMaxMigDeviceCount, (nvmlDevice_t dev, unsigned int *count), 0) \
    X(nvmlReturn_t, nvmlDeviceGetMigDeviceHandleByIndex,                                     \
      (nvmlDevice_t dev, unsigned int index, nvmlDevice_t *mig), 0)                          \
    X(nvmlReturn_t, nvmlDeviceGetDeviceHandleFromMigDeviceHandle,                            \
      (nvmlDevice_t mig, nvmlDevice_t *dev), 0)

#endif /* TPROF_NVML_ABI_H */
