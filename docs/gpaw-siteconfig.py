# GPAW build settings: MPI, FFTW, OpenBLAS and ScaLAPACK from Debian's packages
# (libxc-dev libopenblas-dev libfftw3-dev libopenmpi-dev libscalapack-openmpi-dev)
mpi = True
compiler = 'mpicc'
fftw = True
scalapack = True
libraries = ['xc', 'fftw3', 'openblas', 'scalapack-openmpi']
