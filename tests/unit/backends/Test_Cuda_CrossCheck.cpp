#include "Test_Cuda.hpp"
#include "Test_CrossCheck.hpp"
