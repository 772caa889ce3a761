/* mv_version.h - mvembed's version, as --version prints it and the run record (mv_run_record.h)
 * records it. */
#ifndef MV_VERSION_H
#define MV_VERSION_H

#define MV_VERSION "0.1.0"

#endif
