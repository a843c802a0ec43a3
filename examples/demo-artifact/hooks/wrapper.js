// hook wrapper
